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
