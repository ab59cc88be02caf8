// The alpha-beta-gamma cost model: how long each schedule family takes for one
// call, as pure functions of the call's shape. The planner compares these to
// pick an algorithm and a chunk size; docs/tuning.md explains every formula.
//
// Every formula describes the busiest rank and counts, per schedule:
//   steps        steps on the critical path; each pays alpha once
//   bytes        bytes the rank sends (receiving as much at the same time), plus
//                the time-equivalent of pipeline fill; each pays beta
//   reducedBytes bytes of reduction arithmetic; each pays gamma
//   copiedBytes  bytes of local copies (a rank's own block); each pays copyBeta
// A step moves at most one chunk (one FIFO slot), so chunking changes `steps`.
// Channel lanes run concurrently: their waits overlap (steps are per lane) while
// one thread still moves all bytes (bytes are per rank).
#pragma once

#include <cstddef>
#include <cstdint>

#include "schedule/generate.h"

namespace braid {

// The slowest kind of connection a call's ranks use; it sets alpha and beta.
enum class TransportClass : uint8_t { InProcess, SharedMemory, Tcp };
constexpr int kNumTransportClasses = 3;
const char* transportClassName(TransportClass c);

struct CostParams {
  double alpha = 1e-6;       // seconds per step on the critical path
  double beta = 1.6e-10;     // seconds per byte sent (while receiving as much)
  double gamma = 1.6e-10;    // seconds per byte reduced
  double copyBeta = 1e-10;   // seconds per byte copied locally
};

struct StepCost {
  double steps = 0;
  double bytes = 0;
  double reducedBytes = 0;
  double copiedBytes = 0;
};

double costSeconds(const StepCost& cost, const CostParams& params);

// What the formulas need to know about a call.
struct ModelShape {
  int nranks = 1;
  double bytes = 0;       // n: see modelBytes()
  double chunkBytes = 1;  // the largest step (<= one FIFO slot)
  int nchannels = 1;      // lanes the ring and chain families split data over
};

// n, the size the formulas take, from NCCL's per-call count:
//   AllReduce, Broadcast, Reduce, Send, Recv: count * elemSize (the buffer)
//   ReduceScatter, AllGather, AllToAll:       count * elemSize * nranks (the
//                                             whole input / output of a rank)
//   Gather, Scatter:                          count * elemSize (one rank's block)
double modelBytes(Collective coll, size_t count, size_t elemSize, int nranks);

// ---- the formulas, one per schedule -------------------------------------------
StepCost ringAllReduceCost(const ModelShape& s);
StepCost ringReduceScatterCost(const ModelShape& s);
StepCost ringAllGatherCost(const ModelShape& s);
StepCost chainBroadcastCost(const ModelShape& s);
StepCost chainReduceCost(const ModelShape& s);
StepCost treeAllReduceCost(const ModelShape& s);
StepCost treeBroadcastCost(const ModelShape& s);
StepCost treeReduceCost(const ModelShape& s);
StepCost recursiveDoublingAllReduceCost(const ModelShape& s);
StepCost recursiveDoublingAllGatherCost(const ModelShape& s);
StepCost halvingDoublingAllReduceCost(const ModelShape& s);
StepCost halvingDoublingReduceScatterCost(const ModelShape& s);
StepCost directAllToAllCost(const ModelShape& s);
StepCost directGatherScatterCost(const ModelShape& s);
StepCost pointToPointCost(const ModelShape& s);

// The formula for (coll, algo); false when the model has none for the pair.
bool modelCost(Collective coll, Algorithm algo, const ModelShape& s, StepCost* out);
// Seconds for (coll, algo), or +infinity when the model has no formula.
double predictSeconds(Collective coll, Algorithm algo, const ModelShape& s, const CostParams& p);
// Whether chunks smaller than a slot can make (coll, algo) faster: pipelines
// whose fill time grows with the chunk (chains and trees).
bool isPipelined(Collective coll, Algorithm algo);

}  // namespace braid
