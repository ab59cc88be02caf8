// Where each rank sits in the ring (and tree) of a communicator. Schedules are
// generated over positions 0..P-1; a RankOrder maps those positions to ranks
// so that the ranks of one host are neighbours and the slow links between
// hosts are crossed as few times as possible, whatever the rank numbering.
#pragma once

#include <cstdint>
#include <vector>

namespace braid::schedule {

struct RankOrder {
  std::vector<int> rankAt;      // position -> rank
  std::vector<int> positionOf;  // rank -> position
  bool identity() const { return rankAt.empty(); }
};

// Groups the ranks of each host together: hosts in the order of their lowest
// rank, ranks ascending within a host. Returns the identity (empty) order when
// the numbering is already host by host.
RankOrder hostContiguousOrder(const std::vector<uint64_t>& hostOfRank);

// How many ring links join ranks on different hosts when the ring follows `order`.
int crossHostRingLinks(const RankOrder& order, const std::vector<uint64_t>& hostOfRank);

}  // namespace braid::schedule
