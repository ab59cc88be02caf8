// What each schedule costs, counted on the busiest rank as pure functions of
// the call's shape; the cost model (tuning/cost_model.h) prices the counts
// with the measured alpha, beta and gamma. docs/tuning.md explains every
// formula.
//   steps        steps on the critical path; each pays alpha once
//   bytes        bytes the rank sends (receiving as much at the same time), plus
//                the time-equivalent of pipeline fill; each pays beta
//   reducedBytes bytes of reduction arithmetic; each pays gamma
//   copiedBytes  bytes of local copies (a rank's own block); each pays copyBeta
// A step moves at most one chunk (one FIFO slot), so chunking changes `steps`.
// Channel lanes run concurrently: their waits overlap (steps are per lane) while
// one thread still moves all bytes (bytes are per rank).
#pragma once

namespace braid::schedule {

struct StepCost {
  double steps = 0;
  double bytes = 0;
  double reducedBytes = 0;
  double copiedBytes = 0;
};

// What the formulas need to know about a call.
struct ModelShape {
  int nranks = 1;
  double bytes = 0;       // n: see modelBytes() in tuning/cost_model.h
  double chunkBytes = 1;  // the largest step (<= one FIFO slot)
  int nchannels = 1;      // lanes the ring and chain families split data over
};

// The formulas, one per schedule (schedules.cc pairs them with the generators).
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
StepCost peerAccessAllReduceCost(const ModelShape& s);
StepCost peerAccessReduceScatterCost(const ModelShape& s);
StepCost peerAccessAllGatherCost(const ModelShape& s);

}  // namespace braid::schedule
