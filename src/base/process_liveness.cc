#include "base/process_liveness.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace braid {

namespace {

enum class ProcState { Running, Gone, Unknown };

// Reads the state (field 3) and start time (field 22) of /proc/<pid>/stat.
ProcState readProcState(int pid, unsigned long long* startTime) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = fopen(path, "re");
  if (!f) return ProcState::Gone;
  char buf[1024];
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  // The command name (field 2) may hold spaces and parentheses: parse after the last ')'.
  const char* p = strrchr(buf, ')');
  if (!p || p[1] != ' ') return ProcState::Unknown;
  const char state = p[2];
  if (state == 'Z' || state == 'X' || state == 'x') return ProcState::Gone;
  p += 2;
  for (int field = 3; field < 22; ++field) {
    p = strchr(p, ' ');
    if (!p) return ProcState::Unknown;
    ++p;
  }
  char* end = nullptr;
  *startTime = strtoull(p, &end, 10);
  return end == p ? ProcState::Unknown : ProcState::Running;
}

}  // namespace

uint64_t processStartTime(int pid) {
  unsigned long long started = 0;
  return readProcState(pid, &started) == ProcState::Running ? started : 0;
}

Result checkPeerProcess(const PeerInfo& self, const PeerInfo& peer, const std::string& what) {
  if (!peerProcessGone(self, peer)) return Result::success();
  return fail(ncclRemoteError, "rank %d (pid %d on host %.64s) exited or was killed while %s", peer.rank, peer.pid,
              peer.hostname, what.c_str());
}

bool peerProcessGone(const PeerInfo& self, const PeerInfo& peer) {
  if (self.hostHash != peer.hostHash || self.pidNamespace != peer.pidNamespace || peer.pid <= 0) return false;
  unsigned long long started = 0;
  switch (readProcState(peer.pid, &started)) {
    case ProcState::Gone: return true;
    case ProcState::Unknown: return false;
    case ProcState::Running: return peer.startTime != 0 && started != peer.startTime;
  }
  return false;
}

}  // namespace braid
