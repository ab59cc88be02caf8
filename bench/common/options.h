// Command line of the perf tools: the nccl-tests flags, plus --memory.
#pragma once

#include "common/datatypes.h"
#include "common/option_table.h"

#include <string>
#include <vector>

namespace braid::bench {

enum class MemoryKind { kAuto, kHost, kDevice };

struct Options : SweepOptions {
  int aggIters = 1;
  int average = 1;        // time across ranks: 0 rank 0, 1 avg, 2 min, 3 max
  int blocking = 0;       // 1: barrier after every collective
  int runCycles = 1;      // 0: sweep forever
  int nThreads = 1;
  int nGpus = 1;
  int root = 0;           // -1: every root in turn
  std::vector<TypeInfo> types;
  std::vector<OpInfo> ops;
  MemoryKind memory = MemoryKind::kAuto;
  int graphLaunches = 0;  // -G n: capture the timed iterations in a CUDA graph, launch it n times
  std::vector<std::string> ignored;  // accepted nccl-tests flags that do nothing here
};

// Parses argv. kHelp: usage was requested (print usage, exit 0); kError:
// *error says what is wrong (print it and usage, exit 2).
ParseStatus parseOptions(int argc, char** argv, Options* out, std::string* error);
// The help text, every flag included.
std::string usage(const char* prog);

}  // namespace braid::bench
