// The main of all nine perf tools. CMake builds it once per tool with
// BRAID_PERF_TOOL naming that tool, so a renamed copy still runs its own collective.
#include <cstdio>

#include "common/collective.h"

int main(int argc, char** argv) {
  const braid::bench::CollectiveSpec* spec = braid::bench::findCollective(BRAID_PERF_TOOL);
  if (!spec) {
    std::fprintf(stderr, "%s: built for '%s', which no collective spec names\n", argv[0], BRAID_PERF_TOOL);
    return 2;
  }
  return braid::bench::runPerfTool(*spec, argc, argv);
}
