// Per-family generators behind generatePlan(); each appends lanes to `plan`.
#pragma once

#include "schedule/generate.h"

namespace braid::schedule {

// A contiguous range of elements one channel lane is responsible for.
struct ElemRange {
  size_t begin = 0;
  size_t end = 0;
  size_t size() const { return end - begin; }
};

// Splits [0, count) over up to `nchannels` lanes, never making a lane smaller
// than `minPerChannel` elements (so small calls use one lane); with align > 1
// every lane starts at a multiple of `align` (CollShape::align).
std::vector<ElemRange> splitOverChannels(size_t count, int nchannels, size_t minPerChannel, size_t align = 1);

void ringAllReduce(const CollShape& s, ElemRange range, Lane* lane);
void ringReduceScatter(const CollShape& s, ElemRange range, Lane* lane);
void ringAllGather(const CollShape& s, ElemRange range, Lane* lane);
void chainBroadcast(const CollShape& s, ElemRange range, Lane* lane);
void chainReduce(const CollShape& s, ElemRange range, Lane* lane);

// Families that make several lanes per range (channel split inside).
void treeAllReduce(const CollShape& s, Plan* plan);
void treeBroadcast(const CollShape& s, Plan* plan);
void treeReduce(const CollShape& s, Plan* plan);
void recursiveDoublingAllReduce(const CollShape& s, Plan* plan);
void recursiveDoublingAllGather(const CollShape& s, Plan* plan);
void halvingDoublingAllReduce(const CollShape& s, Plan* plan);
void halvingDoublingReduceScatter(const CollShape& s, Plan* plan);

void pairwiseAllToAll(const CollShape& s, Plan* plan);
void directGather(const CollShape& s, Plan* plan);
void directScatter(const CollShape& s, Plan* plan);
void pointToPoint(const CollShape& s, Plan* plan);

// Ranks that address each other's buffers (peer_access.cc).
void peerAccessAllReduce(const CollShape& s, Plan* plan);
void peerAccessReduceScatter(const CollShape& s, Plan* plan);
void peerAccessAllGather(const CollShape& s, Plan* plan);

}  // namespace braid::schedule
