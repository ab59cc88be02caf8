#include "schedule/step_cost.h"

#include <algorithm>
#include <cmath>

namespace braid::schedule {

namespace {

// Steps needed to move `bytes` in chunks of `chunk`: a partial chunk is a step too.
double chunksOf(double bytes, double chunk) {
  if (bytes <= 0) return 0;
  return std::ceil(bytes / std::max(chunk, 1.0));
}

// Lanes the generators actually use: splitOverChannels never gives a lane less
// than one chunk, so small calls stay on one lane.
double lanesUsed(double bytes, double chunk, int nchannels) {
  double byChunks = std::floor(bytes / std::max(chunk, 1.0));
  return std::max(1.0, std::min(static_cast<double>(std::max(nchannels, 1)), byChunks));
}

int floorLog2(int p) {
  int l = 0;
  while ((2 << l) <= p) ++l;
  return l;
}

int ceilLog2(int p) {
  int l = floorLog2(p);
  return (1 << l) < p ? l + 1 : l;
}

StepCost localCopy(double bytes) {
  StepCost c;
  c.copiedBytes = bytes;
  return c;
}

// Shared by the chain and tree pipelines: `perChunkSteps` steps per chunk on the
// busiest lane, `fill` idle step times before the last rank sees the first chunk.
StepCost pipeline(double chunks, double perChunkSteps, double fill, double chunk) {
  StepCost c;
  c.steps = chunks * perChunkSteps + fill;
  c.bytes = fill * chunk;
  return c;
}

}  // namespace

// Ring allreduce: per lane, slices of p chunks, each slice 2(p-1) lock-step steps.
StepCost ringAllReduceCost(const ModelShape& s) {
  const double p = s.nranks, n = s.bytes, c = s.chunkBytes;
  if (s.nranks <= 1) return localCopy(n);
  const double perLane = n / lanesUsed(n, c, s.nchannels);
  StepCost r;
  r.steps = 2 * (p - 1) * chunksOf(perLane, p * c);
  r.bytes = 2 * (p - 1) / p * n;
  r.reducedBytes = (p - 1) / p * n;
  return r;
}

// Ring reduce-scatter: p-1 steps per chunk of the rank's own block (n/p).
StepCost ringReduceScatterCost(const ModelShape& s) {
  const double p = s.nranks, n = s.bytes, c = s.chunkBytes, block = n / p;
  if (s.nranks <= 1) return localCopy(n);
  StepCost r;
  r.steps = (p - 1) * chunksOf(block / lanesUsed(block, c, s.nchannels), c);
  r.bytes = (p - 1) * block;
  r.reducedBytes = (p - 1) * block;
  return r;
}

// Ring all-gather: as reduce-scatter without arithmetic, plus the own block's copy.
StepCost ringAllGatherCost(const ModelShape& s) {
  const double p = s.nranks, n = s.bytes, c = s.chunkBytes, block = n / p;
  if (s.nranks <= 1) return localCopy(n);
  StepCost r;
  r.steps = (p - 1) * chunksOf(block / lanesUsed(block, c, s.nchannels), c);
  r.bytes = (p - 1) * block;
  r.copiedBytes = block;
  return r;
}

// Chain broadcast: k chunks through p-1 hops take (p-1) + (k-1) step times.
StepCost chainBroadcastCost(const ModelShape& s) {
  const double p = s.nranks, n = s.bytes;
  if (s.nranks <= 1) return localCopy(n);
  const double perLane = n / lanesUsed(n, s.chunkBytes, s.nchannels);
  const double chunk = std::min(s.chunkBytes, perLane);
  StepCost r = pipeline(chunksOf(perLane, s.chunkBytes), 1, p - 2, chunk);
  r.bytes += n;
  return r;
}

// Chain reduce: the broadcast pipeline run backwards, reducing on every hop.
StepCost chainReduceCost(const ModelShape& s) {
  StepCost r = chainBroadcastCost(s);
  if (s.nranks <= 1) return r;
  r.reducedBytes = r.bytes;
  return r;
}

// Double binary tree (src/schedule/tree.cc): the data is cut into ranges, range
// i on tree i % 2, both trees only once there are two chunks of data. A rank is
// inner (two children) in at most one tree and a leaf in the other.
namespace {
struct TreeSplit {
  double ranges;  // 1: everything on tree 0; else both trees carry a share
  double chunks;  // per range
  double chunk;   // bytes of a full step
};

TreeSplit treeSplit(const ModelShape& s) {
  const double lanes = 2 * std::max(1, s.nchannels / 2);
  const double ranges = std::max(1.0, std::min(lanes, std::floor(s.bytes / std::max(s.chunkBytes, 1.0))));
  const double perRange = s.bytes / ranges;
  return {ranges, chunksOf(perRange, s.chunkBytes), std::min(s.chunkBytes, perRange)};
}
}  // namespace

// AllReduce: reduction up and broadcast down pipeline through 2d levels
// (d ~ ceil(log2 p)); the root's lane takes 3 steps per chunk (two receives,
// one extra send). An inner rank sends and receives 3 chunks per chunk of its
// tree, a leaf 1: 2n per rank when both trees carry half, 3n when one carries all.
StepCost treeAllReduceCost(const ModelShape& s) {
  const double n = s.bytes;
  if (s.nranks <= 1) return localCopy(n);
  const TreeSplit t = treeSplit(s);
  const double d = ceilLog2(s.nranks);
  StepCost r = pipeline(t.chunks, 3, 2 * d - 1, t.chunk);
  r.bytes += (t.ranges > 1 ? 2 : 3) * n;
  r.reducedBytes = (t.ranges > 1 ? 1 : 2) * n;
  return r;
}

// Broadcast: the root feeds the top of each tree (d = 1 + ceil(log2(p-1))
// levels); an inner rank forwards each chunk to two children (2 steps).
StepCost treeBroadcastCost(const ModelShape& s) {
  const double n = s.bytes;
  if (s.nranks <= 1) return localCopy(n);
  const TreeSplit t = treeSplit(s);
  const double d = 1 + ceilLog2(std::max(s.nranks - 1, 1));
  StepCost r = pipeline(t.chunks, 2, d - 1, t.chunk);
  r.bytes += (t.ranges > 1 ? 1 : 2) * n;
  return r;
}

// Reduce: the broadcast mirrored; an inner rank receives and reduces two chunks
// per chunk it sends up.
StepCost treeReduceCost(const ModelShape& s) {
  StepCost r = treeBroadcastCost(s);
  if (s.nranks <= 1) return r;
  r.reducedBytes = (treeSplit(s).ranges > 1 ? 1 : 2) * s.bytes;
  return r;
}

// Recursive doubling allreduce (src/schedule/recursive_doubling.cc): per chunk,
// log2(p') rounds of one receive-reduce-send each, exchanging the chunk with the
// partner at distance 2^i. With p not a power of two, an extra rank folds its
// chunk into a core rank first (one more receive-reduce per chunk there) and
// gets the result back (one more hop at the end).
StepCost recursiveDoublingAllReduceCost(const ModelShape& s) {
  const double n = s.bytes;
  if (s.nranks <= 1) return localCopy(n);
  const int L = floorLog2(s.nranks);
  const double fold = (1 << L) != s.nranks ? 1 : 0;
  const double perLane = n / lanesUsed(n, s.chunkBytes, s.nchannels);
  StepCost r;
  r.steps = (L + fold) * chunksOf(perLane, s.chunkBytes) + fold;
  r.bytes = (L + fold) * n + fold * std::min(s.chunkBytes, perLane);
  r.reducedBytes = (L + fold) * n;
  return r;
}

// Recursive doubling all-gather: round i exchanges 2^i blocks of n/p; with p not
// a power of two, Bruck's rounds (distance d sends min(d, p-d) blocks) instead.
// Either way every rank sends p-1 blocks in ceil(log2 p) rounds.
StepCost recursiveDoublingAllGatherCost(const ModelShape& s) {
  const double n = s.bytes, p = s.nranks, block = n / p;
  if (s.nranks <= 1) return localCopy(n);
  const double laneBlock = block / lanesUsed(block, s.chunkBytes, s.nchannels);
  StepCost r;
  for (int d = 1; d < s.nranks; d *= 2) r.steps += chunksOf(std::min(d, s.nranks - d) * laneBlock, s.chunkBytes);
  r.bytes = (p - 1) * block;
  r.copiedBytes = block;
  return r;
}

namespace {
// Recursive halving over p' ranks, one lane's share: round i exchanges n/2^i.
StepCost halvingPhase(double n, double perLane, int L, double chunk) {
  StepCost r;
  for (int i = 1; i <= L; ++i) r.steps += chunksOf(perLane / (1 << i), chunk);
  const double pp = 1 << L;
  r.bytes = (pp - 1) / pp * n;
  r.reducedBytes = r.bytes;
  return r;
}
}  // namespace

// Halving-doubling (Rabenseifner) allreduce (src/schedule/halving_doubling.cc):
// recursive-halving reduce-scatter, then recursive-doubling all-gather of the
// same sizes; an extra rank sends its whole input to a core rank first and
// receives the whole result at the end.
StepCost halvingDoublingAllReduceCost(const ModelShape& s) {
  const double n = s.bytes;
  if (s.nranks <= 1) return localCopy(n);
  const int L = floorLog2(s.nranks);
  const double perLane = n / lanesUsed(n, s.chunkBytes, s.nchannels);
  StepCost r = halvingPhase(n, perLane, L, s.chunkBytes);
  r.steps *= 2;
  r.bytes *= 2;
  if ((1 << L) != s.nranks) {
    r.steps += 2 * chunksOf(perLane, s.chunkBytes);
    r.bytes += 2 * n;
    r.reducedBytes += n;
  }
  return r;
}

// Halving-doubling reduce-scatter: the halving phase over all n; an extra rank
// folds its whole input into a core rank and receives its own block at the end.
StepCost halvingDoublingReduceScatterCost(const ModelShape& s) {
  const double n = s.bytes, block = n / s.nranks;
  if (s.nranks <= 1) return localCopy(n);
  const int L = floorLog2(s.nranks);
  const double lanes = lanesUsed(block, s.chunkBytes, s.nchannels);
  StepCost r = halvingPhase(n, n / lanes, L, s.chunkBytes);
  if ((1 << L) != s.nranks) {
    r.steps += chunksOf(n / lanes, s.chunkBytes) + chunksOf(block / lanes, s.chunkBytes);
    r.bytes += n + block;
    r.reducedBytes += n;
  }
  return r;
}

// All-to-all: one block of n/p to each of p-1 peers, one step per chunk each.
StepCost directAllToAllCost(const ModelShape& s) {
  const double p = s.nranks, block = s.bytes / p;
  StepCost r;
  r.steps = (p - 1) * chunksOf(block, s.chunkBytes);
  r.bytes = (p - 1) * block;
  r.copiedBytes = block;
  return r;
}

// Gather / scatter: the root receives / sends p-1 blocks of n.
StepCost directGatherScatterCost(const ModelShape& s) {
  const double p = s.nranks, block = s.bytes;
  StepCost r;
  r.steps = (p - 1) * chunksOf(block, s.chunkBytes);
  r.bytes = (p - 1) * block;
  r.copiedBytes = block;
  return r;
}

StepCost pointToPointCost(const ModelShape& s) {
  StepCost r;
  r.steps = chunksOf(s.bytes, s.chunkBytes);
  r.bytes = s.bytes;
  return r;
}

// Peer access: no message and no step to wait for; the rank reads its block
// of every rank's buffer and writes it at every rank, in one pass.
// Allreduce: reads p blocks of n/p (reducing p-1 of them), writes p.
StepCost peerAccessAllReduceCost(const ModelShape& s) {
  const double p = s.nranks, n = s.bytes;
  StepCost r;
  r.reducedBytes = (p - 1) / p * n;
  r.copiedBytes = n;
  return r;
}

// Reduce-scatter (n: a rank's whole input): reads its block of every input,
// writes its own output block.
StepCost peerAccessReduceScatterCost(const ModelShape& s) {
  const double p = s.nranks, n = s.bytes;
  StepCost r;
  r.reducedBytes = (p - 1) / p * n;
  r.copiedBytes = n / p;
  return r;
}

// All-gather (n: a rank's whole output): its input written into every output.
StepCost peerAccessAllGatherCost(const ModelShape& s) {
  StepCost r;
  r.copiedBytes = s.bytes;
  return r;
}

}  // namespace braid::schedule
