#include "topology/pair_class.h"

#include <cstring>

namespace braid::topology {

namespace {

PeerInfo peerInfoFor(const RankPlacement& p, int rank) {
  PeerInfo info;
  std::memset(&info, 0, sizeof info);
  info.rank = rank;
  info.cudaDev = p.gpuBusId.empty() ? -1 : 0;
  info.hostHash = p.hostHash;
  info.shmDomain = p.shmDomain;
  info.processId = p.processId;
  return info;
}

// The path the hardware calls for, given the transport braid picked.
PairPath pathFor(const std::string& transport, const RankPlacement& a, const RankPlacement& b) {
  if (transport == "inproc") return PairPath::kInproc;
  if (transport == "shm")
    return !a.gpuBusId.empty() && !b.gpuBusId.empty() ? PairPath::kP2p : PairPath::kShm;
  if (transport == "tcp")
    return a.hostHash != b.hostHash && a.ibUsable && b.ibUsable ? PairPath::kIb : PairPath::kTcp;
  if (transport == "ib") return PairPath::kIb;
  if (transport == "p2p") return PairPath::kP2p;
  return PairPath::kNone;
}

}  // namespace

const char* pairPathName(PairPath path) {
  switch (path) {
    case PairPath::kInproc: return "inproc";
    case PairPath::kShm: return "shm";
    case PairPath::kP2p: return "p2p";
    case PairPath::kTcp: return "tcp";
    case PairPath::kIb: return "ib";
    case PairPath::kNone: return "none";
  }
  return "?";
}

bool PairTransport::implemented() const { return transport == pairPathName(path); }

std::string PairTransport::describe() const {
  if (transport.empty()) return "none (no transport can join them)";
  if (implemented()) return transport;
  return std::string(pairPathName(path)) + " (not implemented yet; " + transport + " today)";
}

std::string PairTransport::shortName() const {
  if (transport.empty()) return "-";
  return implemented() ? transport : std::string(pairPathName(path)) + "*";
}

PairTransport classifyPair(const RankPlacement& a, const RankPlacement& b,
                           const std::vector<std::unique_ptr<transports::Transport>>& transports) {
  const PeerInfo self = peerInfoFor(a, 0), peer = peerInfoFor(b, 1);
  PairTransport out;
  for (const auto& t : transports) {
    if (t->canConnect(self, peer)) {
      out.transport = t->name();
      break;
    }
  }
  out.path = pathFor(out.transport, a, b);
  return out;
}

}  // namespace braid::topology
