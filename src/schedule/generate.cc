#include <algorithm>

#include "schedule/generators.h"

namespace braid {

std::vector<ElemRange> splitOverChannels(size_t count, int nchannels, size_t minPerChannel) {
  size_t lanes = std::max<size_t>(1, std::min<size_t>(nchannels, count / std::max<size_t>(1, minPerChannel)));
  std::vector<ElemRange> ranges;
  size_t begin = 0;
  for (size_t i = 0; i < lanes; ++i) {
    size_t n = count / lanes + (i < count % lanes ? 1 : 0);
    ranges.push_back({begin, begin + n});
    begin += n;
  }
  return ranges;
}

const char* algorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::Ring: return "Ring";
    case Algorithm::Tree: return "Tree";
    case Algorithm::RecursiveDoubling: return "RecursiveDoubling";
    case Algorithm::HalvingDoubling: return "HalvingDoubling";
    case Algorithm::Direct: return "Direct";
  }
  return "?";
}

bool algorithmSupports(Algorithm a, Collective c) {
  switch (a) {
    case Algorithm::Ring:
      return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::AllGather ||
             c == Collective::Broadcast || c == Collective::Reduce;
    case Algorithm::Tree:
      return c == Collective::AllReduce || c == Collective::Broadcast || c == Collective::Reduce;
    case Algorithm::RecursiveDoubling: return c == Collective::AllReduce || c == Collective::AllGather;
    case Algorithm::HalvingDoubling: return c == Collective::AllReduce || c == Collective::ReduceScatter;
    case Algorithm::Direct:
      return c == Collective::AllToAll || c == Collective::Gather || c == Collective::Scatter ||
             c == Collective::Send || c == Collective::Recv;
  }
  return false;
}

namespace {

// The non-ring families; false when `a` has no schedule for the collective.
bool generateOther(const CollShape& s, Algorithm a, Plan* plan) {
  switch (a) {
    case Algorithm::Tree:
      if (s.coll == Collective::AllReduce) treeAllReduce(s, plan);
      if (s.coll == Collective::Broadcast) treeBroadcast(s, plan);
      if (s.coll == Collective::Reduce) treeReduce(s, plan);
      return true;
    case Algorithm::RecursiveDoubling:
      if (s.coll == Collective::AllReduce) recursiveDoublingAllReduce(s, plan);
      if (s.coll == Collective::AllGather) recursiveDoublingAllGather(s, plan);
      return true;
    case Algorithm::HalvingDoubling:
      if (s.coll == Collective::AllReduce) halvingDoublingAllReduce(s, plan);
      if (s.coll == Collective::ReduceScatter) halvingDoublingReduceScatter(s, plan);
      return true;
    default: return false;
  }
}

// Generates over positions (rank, root and peers are positions).
Plan generateInPositions(const CollShape& s) {
  Plan plan;
  if (s.count == 0) return plan;
  switch (s.coll) {
    case Collective::AllToAll: pairwiseAllToAll(s, &plan); return plan;
    case Collective::Gather: directGather(s, &plan); return plan;
    case Collective::Scatter: directScatter(s, &plan); return plan;
    case Collective::Send:
    case Collective::Recv: pointToPoint(s, &plan); return plan;
    default: break;
  }
  // An algorithm that cannot serve the collective falls back to the ring.
  if (algorithmSupports(s.algorithm, s.coll) && generateOther(s, s.algorithm, &plan)) return plan;
  // Ring families: one lane per channel, each owning a slice of the elements.
  // A channel is only worth its synchronisation with a few chunks of data.
  auto ranges = splitOverChannels(s.count, s.nchannels, s.chunkElems);
  for (size_t c = 0; c < ranges.size(); ++c) {
    Lane lane{{LaneKind::Channel, static_cast<int32_t>(c)}, static_cast<int32_t>(c), {}};
    switch (s.coll) {
      case Collective::AllReduce: ringAllReduce(s, ranges[c], &lane); break;
      case Collective::ReduceScatter: ringReduceScatter(s, ranges[c], &lane); break;
      case Collective::AllGather: ringAllGather(s, ranges[c], &lane); break;
      case Collective::Broadcast: chainBroadcast(s, ranges[c], &lane); break;
      case Collective::Reduce: chainReduce(s, ranges[c], &lane); break;
      default: break;
    }
    if (!lane.steps.empty()) plan.lanes.push_back(std::move(lane));
  }
  return plan;
}

// Which algorithm actually runs: one that cannot serve the collective is the ring.
Algorithm effectiveAlgorithm(const CollShape& s) {
  return algorithmSupports(s.algorithm, s.coll) ? s.algorithm : Algorithm::Ring;
}

bool orderApplies(const CollShape& s) {
  if (!s.order || s.order->identity()) return false;
  switch (s.coll) {
    case Collective::AllReduce:
    case Collective::Broadcast:
    case Collective::Reduce: return true;
    case Collective::AllGather:
    case Collective::ReduceScatter: return effectiveAlgorithm(s) == Algorithm::Ring;
    default: return false;
  }
}

// The per-rank blocks of the buffer that all-gather (output) and
// reduce-scatter (input) lay out by rank: position b's block is rank(b)'s.
// Ring steps never cross a block boundary, so each reference moves whole.
void remapBlocks(const CollShape& s, Plan* plan) {
  const Buffer byRank = s.coll == Collective::AllGather ? Buffer::Output : Buffer::Input;
  const std::vector<int>& rankAt = s.order->rankAt;
  auto remap = [&](BufferRef* ref) {
    if (ref->buffer != byRank) return;
    const size_t block = ref->offset / s.count;
    ref->offset = static_cast<size_t>(rankAt[block]) * s.count + ref->offset % s.count;
  };
  for (Lane& lane : plan->lanes)
    for (Step& st : lane.steps) {
      remap(&st.src);
      remap(&st.dst);
    }
}

void positionsToRanks(const CollShape& s, Plan* plan) {
  const std::vector<int>& rankAt = s.order->rankAt;
  for (Lane& lane : plan->lanes) {
    if (lane.key.kind != LaneKind::Channel) lane.key.index = rankAt[lane.key.index];
    for (Step& st : lane.steps) {
      if (stepSends(st.kind)) st.sendPeer = rankAt[st.sendPeer];
      if (stepReceives(st.kind)) st.recvPeer = rankAt[st.recvPeer];
    }
  }
  if (s.coll == Collective::AllGather || s.coll == Collective::ReduceScatter) remapBlocks(s, plan);
}

}  // namespace

Plan generatePlan(const CollShape& s) {
  if (!orderApplies(s)) return generateInPositions(s);
  CollShape atPosition = s;
  atPosition.rank = s.order->positionOf[s.rank];
  atPosition.root = s.order->positionOf[s.root];
  Plan plan = generateInPositions(atPosition);
  positionsToRanks(s, &plan);
  return plan;
}

}  // namespace braid
