// The peer-access family: every rank's buffers are addressable by every lane
// (ranks of one process on one GPU, or host threads of one process), so a
// rank reduces the block it owns straight from every rank's input into every
// rank's output in one pass (StepKind::PeerReduce): no FIFO, no message, and
// the device-memory traffic of a direct reduction (2x the buffer per rank for
// an allreduce). Rank r owns block r of the elements, split over channel
// lanes; no two steps of any ranks touch the same element, which is what lets
// the lanes run without waiting on each other (docs/algorithms.md).
#include "schedule/generators.h"

namespace braid::schedule {

namespace {

// Elements [begin, end) of `count` that rank `rank` of `nranks` owns.
ElemRange ownedBlock(size_t count, int rank, int nranks) {
  const size_t p = static_cast<size_t>(nranks), r = static_cast<size_t>(rank);
  return {count * r / p, count * (r + 1) / p};
}

// One lane per channel over `range`, each a single PeerReduce step from
// src + offset to dst + offset.
void peerLanes(const CollShape& s, ElemRange range, Step proto, size_t srcBase, size_t dstBase, Plan* plan) {
  const auto ranges = splitOverChannels(range.size(), s.nchannels, s.chunkElems);
  for (size_t c = 0; c < ranges.size(); ++c) {
    if (ranges[c].size() == 0) continue;
    Step st = proto;
    st.src.offset = srcBase + range.begin + ranges[c].begin;
    st.dst.offset = dstBase + range.begin + ranges[c].begin;
    st.count = ranges[c].size();
    Lane lane{{LaneKind::Channel, static_cast<int32_t>(c)}, static_cast<int32_t>(c), {st}};
    plan->lanes.push_back(std::move(lane));
  }
}

Step peerStep(Buffer src, Buffer dst, bool peerSrc, bool peerDst, bool reduces) {
  Step st;
  st.kind = StepKind::PeerReduce;
  st.src.buffer = src;
  st.dst.buffer = dst;
  st.peerSrc = peerSrc;
  st.peerDst = peerDst;
  st.srcIsContribution = reduces;
  st.final = reduces;
  return st;
}

}  // namespace

void peerAccessAllReduce(const CollShape& s, Plan* plan) {
  const Step st = peerStep(Buffer::Input, Buffer::Output, true, true, true);
  peerLanes(s, ownedBlock(s.count, s.rank, s.nranks), st, 0, 0, plan);
}

// Rank r's output is block r of every input, reduced.
void peerAccessReduceScatter(const CollShape& s, Plan* plan) {
  const Step st = peerStep(Buffer::Input, Buffer::Output, true, false, true);
  peerLanes(s, {0, s.count}, st, static_cast<size_t>(s.rank) * s.count, 0, plan);
}

// Rank r's input goes to block r of every output.
void peerAccessAllGather(const CollShape& s, Plan* plan) {
  const Step st = peerStep(Buffer::Input, Buffer::Output, false, true, false);
  peerLanes(s, {0, s.count}, st, 0, static_cast<size_t>(s.rank) * s.count, plan);
}

}  // namespace braid::schedule
