#include "schedule/schedules.h"

#include <cstddef>

#include "schedule/generators.h"

namespace braid::schedule {
namespace {

// The ring and chain families: one lane per channel, each owning a slice of
// the elements (a channel is only worth its synchronisation with a few chunks).
template <void (*Lanes)(const CollShape&, ElemRange, Lane*)>
void channelLanes(const CollShape& s, Plan* plan) {
  const auto ranges = splitOverChannels(s.count, s.nchannels, s.chunkElems);
  for (size_t c = 0; c < ranges.size(); ++c) {
    Lane lane{{LaneKind::Channel, static_cast<int32_t>(c)}, static_cast<int32_t>(c), {}};
    Lanes(s, ranges[c], &lane);
    if (!lane.steps.empty()) plan->lanes.push_back(std::move(lane));
  }
}

using C = Collective;
using A = Algorithm;

const Schedule kSchedules[] = {
    {C::AllReduce, A::Ring, channelLanes<ringAllReduce>, ringAllReduceCost, false},
    {C::ReduceScatter, A::Ring, channelLanes<ringReduceScatter>, ringReduceScatterCost, false},
    {C::AllGather, A::Ring, channelLanes<ringAllGather>, ringAllGatherCost, false},
    {C::Broadcast, A::Ring, channelLanes<chainBroadcast>, chainBroadcastCost, true},
    {C::Reduce, A::Ring, channelLanes<chainReduce>, chainReduceCost, true},
    {C::AllReduce, A::Tree, treeAllReduce, treeAllReduceCost, true},
    {C::Broadcast, A::Tree, treeBroadcast, treeBroadcastCost, true},
    {C::Reduce, A::Tree, treeReduce, treeReduceCost, true},
    {C::AllReduce, A::RecursiveDoubling, recursiveDoublingAllReduce, recursiveDoublingAllReduceCost, false},
    {C::AllGather, A::RecursiveDoubling, recursiveDoublingAllGather, recursiveDoublingAllGatherCost, false},
    {C::AllReduce, A::HalvingDoubling, halvingDoublingAllReduce, halvingDoublingAllReduceCost, false},
    {C::ReduceScatter, A::HalvingDoubling, halvingDoublingReduceScatter, halvingDoublingReduceScatterCost, false},
    {C::AllToAll, A::Direct, pairwiseAllToAll, directAllToAllCost, false},
    {C::Gather, A::Direct, directGather, directGatherScatterCost, false},
    {C::Scatter, A::Direct, directScatter, directGatherScatterCost, false},
    {C::Send, A::Direct, pointToPoint, pointToPointCost, false},
    {C::Recv, A::Direct, pointToPoint, pointToPointCost, false},
    {C::AllReduce, A::PeerAccess, peerAccessAllReduce, peerAccessAllReduceCost, false},
    {C::ReduceScatter, A::PeerAccess, peerAccessReduceScatter, peerAccessReduceScatterCost, false},
    {C::AllGather, A::PeerAccess, peerAccessAllGather, peerAccessAllGatherCost, false},
};

}  // namespace

const Schedule* findSchedule(Collective coll, Algorithm algorithm) {
  // Indexed once: planning one call looks rows up some fifty times.
  constexpr size_t kColls = size_t(Collective::Recv) + 1, kAlgos = size_t(kNumAlgorithms);
  struct Index {
    const Schedule* row[kColls][kAlgos] = {};
  };
  static const Index index = [] {
    Index ix;
    for (const Schedule& s : kSchedules) ix.row[size_t(s.coll)][size_t(s.algorithm)] = &s;
    return ix;
  }();
  const size_t c = size_t(coll), a = size_t(algorithm);
  return c < kColls && a < kAlgos ? index.row[c][a] : nullptr;
}

}  // namespace braid::schedule
