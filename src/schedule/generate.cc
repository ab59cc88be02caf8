#include <algorithm>

#include "schedule/generators.h"
#include "schedule/schedules.h"

namespace braid::schedule {

std::vector<ElemRange> splitOverChannels(size_t count, int nchannels, size_t minPerChannel, size_t align) {
  size_t lanes = std::max<size_t>(1, std::min<size_t>(nchannels, count / std::max<size_t>(1, minPerChannel)));
  std::vector<ElemRange> ranges;
  if (align > 1) {
    // At least `align` elements a lane, so that aligned starts stay distinct.
    lanes = std::max<size_t>(1, std::min(lanes, count / align));
    for (size_t i = 0; i < lanes; ++i) {
      const size_t begin = count * i / lanes / align * align;
      const size_t end = i + 1 == lanes ? count : count * (i + 1) / lanes / align * align;
      ranges.push_back({begin, end});
    }
    return ranges;
  }
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
    case Algorithm::PeerAccess: return "PeerAccess";
  }
  return "?";
}

bool algorithmSupports(Algorithm a, Collective c) { return findSchedule(c, a) != nullptr; }

namespace {

// Which algorithm actually runs: one that cannot serve the collective is the
// ring, and the pairwise collectives have only Direct.
Algorithm effectiveAlgorithm(const CollShape& s) {
  if (algorithmSupports(s.algorithm, s.coll)) return s.algorithm;
  return algorithmSupports(Algorithm::Ring, s.coll) ? Algorithm::Ring : Algorithm::Direct;
}

// Generates over positions (rank, root and peers are positions).
Plan generateInPositions(const CollShape& s) {
  Plan plan;
  if (s.count > 0) findSchedule(s.coll, effectiveAlgorithm(s))->generate(s, &plan);
  return plan;
}

bool orderApplies(const CollShape& s) {
  // Rings and trees only: a peer-access rank's block is its own.
  if (!s.order || s.order->identity() || effectiveAlgorithm(s) == Algorithm::PeerAccess) return false;
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

}  // namespace braid::schedule
