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

}  // namespace

Plan generatePlan(const CollShape& s) {
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

}  // namespace braid
