// Logs of forked ranks: each rank writes NCCL_DEBUG_FILE=<dir>/rank.%p.log,
// and the test reads every line back once the ranks are done.
#ifndef BRAID_TESTS_COMMON_LOG_DIR_H_
#define BRAID_TESTS_COMMON_LOG_DIR_H_

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

namespace mptest {

// A fresh directory /tmp/<prefix>XXXXXX for the ranks' logs ("" if none could be made).
inline std::string makeLogDir(const std::string& prefix) {
  std::string dir = "/tmp/" + prefix + "XXXXXX";
  return mkdtemp(&dir[0]) != nullptr ? dir : std::string();
}

// How many of `lines` contain `what`.
inline size_t countContaining(const std::vector<std::string>& lines, const std::string& what) {
  size_t n = 0;
  for (const std::string& l : lines) n += l.find(what) != std::string::npos;
  return n;
}

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
