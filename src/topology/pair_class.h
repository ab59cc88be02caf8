// Which transport braid uses between two ranks, told from what each rank knows
// about where it runs. The answer comes from the transports themselves: the
// same Transport objects and order as a communicator (see makeTransports in
// transports/registry/registry.h and selectTransport in src/engine/comm.cc), so this describes
// braid's choice rather than re-deciding it. On top of that it names the path
// the topology would call for where braid does not have it yet (GPU P2P, IB).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transports/transport.h"

namespace braid::topology {

struct RankPlacement {
  uint64_t hostHash = 0;   // PeerInfo::hostHash
  uint64_t shmDomain = 0;  // PeerInfo::shmDomain (same /dev/shm and ipc namespace)
  uint64_t processId = 0;  // PeerInfo::processId
  std::string gpuBusId;    // empty: no GPU
  int numaNode = -1;
  bool ibUsable = false;   // this rank's host has an ACTIVE IB/RoCE port
};

enum class PairPath { kInproc, kShm, kP2p, kTcp, kIb, kNone };

struct PairTransport {
  std::string transport;  // what braid connects with today ("inproc", "shm", "tcp")
  PairPath path = PairPath::kNone;  // what the topology calls for
  bool implemented() const;  // `path` is what `transport` is
  std::string describe() const;  // "shm", "p2p (not implemented yet; shm today)"
  std::string shortName() const;  // matrix cell: "shm", "p2p*"
};

PairTransport classifyPair(const RankPlacement& a, const RankPlacement& b,
                           const std::vector<std::unique_ptr<transports::Transport>>& transports);

const char* pairPathName(PairPath path);

}  // namespace braid::topology
