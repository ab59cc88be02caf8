#include "engine/lanes/peer_access.h"

#include <cstring>

#include "engine/comm.h"

namespace braid::lanes {

namespace {

bool collectiveHasPeerAccess(schedule::Collective c) {
  return c == schedule::Collective::AllReduce || c == schedule::Collective::ReduceScatter ||
         c == schedule::Collective::AllGather;
}

// Ranks of one communicator: each one's view of every rank (PeerInfo, with
// each rank's random nonce) is byte for byte the same.
bool sameCommunicator(const ncclComm* a, const ncclComm* b) {
  if (a->nranks != b->nranks || a->peers.size() != b->peers.size()) return false;
  return memcmp(a->peers.data(), b->peers.data(), a->peers.size() * sizeof(PeerInfo)) == 0;
}

// The calls are one collective, the same call of each rank (its number,
// engine/fingerprint.h): the lane of each rank reduces with its own RedOp, so
// the ranks' reductions (a PreMulSum's scalar included) must agree too.
bool sameCall(const engine::Task& a, const engine::Task& b) {
  return a.coll == b.coll && a.callNumber == b.callNumber && a.count == b.count && a.type == b.type &&
         a.op == b.op &&
         a.deviceScalar == nullptr && b.deviceScalar == nullptr && a.wire == reduce::WireType::None &&
         b.wire == reduce::WireType::None;
}

}  // namespace

PeerAccessGroups peerAccessGroups(const std::vector<const engine::Task*>& tasks,
                                  const std::function<bool(const engine::Task&, const engine::Task&)>& sameRunner) {
  PeerAccessGroups groups;
  if (tasks.size() < 2) return groups;  // a communicator of two ranks or more
  std::map<const ncclComm*, int> callsOf;
  for (const engine::Task* t : tasks) ++callsOf[t->comm];
  for (const engine::Task* t : tasks) {
    ncclComm* comm = t->comm;
    // Fewer calls than ranks (a process or thread per rank) cannot hold them all.
    if (tasks.size() < size_t(comm->nranks) || groups.count(comm) || callsOf[comm] != 1 || comm->nranks < 2 ||
        !collectiveHasPeerAccess(t->coll))
      continue;
    std::vector<const engine::Task*> byRank(size_t(comm->nranks), nullptr);
    bool whole = true;
    for (const engine::Task* u : tasks) {
      if (!sameCommunicator(comm, u->comm)) continue;
      const engine::Task*& at = byRank[size_t(u->comm->rank)];
      whole = whole && at == nullptr && callsOf[u->comm] == 1 && sameCall(*t, *u) && sameRunner(*t, *u);
      at = u;
    }
    for (const engine::Task* u : byRank) whole = whole && u != nullptr;
    if (!whole) continue;
    std::vector<ncclComm*> ranks;
    for (const engine::Task* u : byRank) ranks.push_back(u->comm);
    for (ncclComm* c : ranks) groups[c] = ranks;
  }
  return groups;
}

}  // namespace braid::lanes
