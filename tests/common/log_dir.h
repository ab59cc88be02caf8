// Logs of forked ranks: each rank writes NCCL_DEBUG_FILE=<dir>/rank.%p.log,
// and the test reads every line back once the ranks are done.
#ifndef BRAID_TESTS_COMMON_LOG_DIR_H_
#define BRAID_TESTS_COMMON_LOG_DIR_H_

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

namespace mptest {

// The lines of every file in `dir`; the files and `dir` are removed.
inline std::vector<std::string> readLogLines(const std::string& dir) {
  std::vector<std::string> lines;
  DIR* d = opendir(dir.c_str());
  if (!d) return lines;
  std::vector<std::string> files;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') files.push_back(dir + "/" + e->d_name);
  closedir(d);
  for (const auto& f : files) {
    std::ifstream in(f);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    unlink(f.c_str());
  }
  rmdir(dir.c_str());
  return lines;
}

}  // namespace mptest

#endif  // BRAID_TESTS_COMMON_LOG_DIR_H_
