// What a process holds, read from /proc and /dev/shm, for the soak tests:
// resident memory, bytes in use on the malloc heap, open descriptors,
// threads, and braid's shared-memory segments. braid names a segment
// "/braid-<creator pid>-<random>" (transports/shm/shm_segment.cc), so the
// segments of a set of processes can be told from those of other jobs.
#pragma once

#include <dirent.h>
#include <malloc.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace soak {

inline long rssKb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

inline int countEntries(const char* dir) {
  DIR* d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - (std::strcmp(dir, "/proc/self/fd") == 0 ? 1 : 0);  // opendir's own fd
}

// Names in /dev/shm of segments created by any of `pids`.
inline std::vector<std::string> shmSegments(const std::vector<pid_t>& pids) {
  std::vector<std::string> out;
  DIR* d = opendir("/dev/shm");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    for (pid_t pid : pids) {
      const std::string prefix = "braid-" + std::to_string(pid) + "-";
      if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) out.push_back(e->d_name);
    }
  }
  closedir(d);
  return out;
}

struct Usage {
  long rssKb = 0;
  long heapBytes = 0;  // malloc'd and not freed, mmapped blocks included (mallinfo2)
  int fds = 0;
  int threads = 0;
  int shm = 0;  // segments this process created and has not removed

  std::string str() const {
    char buf[200];
    std::snprintf(buf, sizeof(buf), "rss %ld KiB, heap %ld B, %d fds, %d threads, %d shm segments",
                  rssKb, heapBytes, fds, threads, shm);
    return buf;
  }
};

inline Usage sample() {
  Usage u;
  u.rssKb = rssKb();
  const struct mallinfo2 mi = mallinfo2();
  u.heapBytes = static_cast<long>(mi.uordblks + mi.hblkhd);  // large blocks are mmapped
  u.fds = countEntries("/proc/self/fd");
  u.threads = countEntries("/proc/self/task");
  u.shm = static_cast<int>(shmSegments({getpid()}).size());
  return u;
}

// Fixed allowances for growth between two samples: enough for allocator and
// timing noise, far below what a leak per call or per cycle adds up to.
struct Slack {
  long rssKb = 2048;
  long heapBytes = 64 << 10;
  int fds = 0;
  int threads = 0;
  int shm = 0;
};

// Why `now` exceeds `base` by more than `slack`; "" when it does not.
inline std::string growth(const Usage& base, const Usage& now, const Slack& slack) {
  std::string why;
  auto check = [&](const char* what, long a, long b, long allowed) {
    if (b - a > allowed)
      why += std::string(what) + " grew from " + std::to_string(a) + " to " + std::to_string(b) +
             " (allowed +" + std::to_string(allowed) + "); ";
  };
  check("RSS KiB", base.rssKb, now.rssKb, slack.rssKb);
  check("heap bytes", base.heapBytes, now.heapBytes, slack.heapBytes);
  check("open fds", base.fds, now.fds, slack.fds);
  check("threads", base.threads, now.threads, slack.threads);
  check("shm segments", base.shm, now.shm, slack.shm);
  return why;
}

// Threads and descriptors that braid is releasing (a bootstrap root thread
// that just sent its last table) may take a moment to go: sample until the
// counts are back within `slack` of `base`, for at most `seconds`.
inline Usage settledSample(const Usage& base, const Slack& slack, double seconds = 2.0) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(seconds));
  Usage u = sample();
  while (std::chrono::steady_clock::now() < deadline &&
         (u.fds - base.fds > slack.fds || u.threads - base.threads > slack.threads ||
          u.shm - base.shm > slack.shm)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    u = sample();
  }
  return u;
}

}  // namespace soak
