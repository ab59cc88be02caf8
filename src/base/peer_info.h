// What this rank tells the others about itself.
#pragma once

#include <sys/socket.h>

#include <cstdint>

namespace braid {

// What a rank tells every other rank about itself at init (exchanged as raw
// bytes over the bootstrap, so plain data only).
struct PeerInfo {
  int32_t rank;
  int32_t cudaDev;        // -1 without a GPU
  uint64_t hostHash;      // same host <=> same value (BRAID_HOSTID overrides)
  uint64_t shmDomain;     // same /dev/shm <=> same value (ipc + mount namespace)
  uint64_t processId;     // unique per process on the host (pid + start time)
  uint64_t pidNamespace;  // pids compare only within one pid namespace
  uint64_t startTime;     // field 22 of /proc/<pid>/stat: tells a reused pid apart
  int32_t pid;
  // The PCI domain, bus and device of the rank's current GPU at creation,
  // packed (gpuBusIdOf), or -1: none, or CUDA not yet in use by the process.
  int32_t gpuBusId;
  // That GPU's multiprocessors (0 with gpuBusId -1): how many plan-kernel
  // lanes it runs at once (tuning/device_channels.h).
  int32_t gpuSms;
  // Random, drawn by each rank of each communicator: two communicators of the
  // same ranks (two ncclCommInitAll, a split) differ in their peers' tables.
  uint64_t nonce;
  uint8_t tcpAddr[128];   // sockaddr_storage of the interface the bootstrap chose
  char hostname[64];
  // The /dev/shm segment of the rank's presence slot (engine/presence_board.h),
  // NUL-terminated; empty: it has none.
  char presenceName[48];
  // The CPUs the rank's process may run on when it joined (bit c of word
  // c / 64: CPU c, for c < 1024): ranks pinned one per core have a core each
  // however few CPUs each one sees.
  uint64_t cpuMask[16];
};

// Adds the CPUs of `info.cpuMask` to `mask`.
inline void addCpus(const PeerInfo& info, uint64_t (&mask)[16]) {
  for (int w = 0; w < 16; ++w) mask[w] |= info.cpuMask[w];
}
inline int countCpus(const uint64_t (&mask)[16]) {
  int n = 0;
  for (uint64_t w : mask) n += __builtin_popcountll(w);
  return n;
}

// Host identity: BRAID_HOSTID when set, else hostname + boot id + network
// namespace, so that ranks in different network namespaces count as different
// hosts (the several-hosts tests rely on it).
uint64_t localHostHash();

// Two ranks of one process (processId is unique per process on its host).
inline bool sameProcess(const PeerInfo& a, const PeerInfo& b) {
  return a.hostHash == b.hostHash && a.processId == b.processId;
}

PeerInfo makeLocalPeerInfo(int rank, int cudaDev, const sockaddr_storage& tcpAddr);

}  // namespace braid
