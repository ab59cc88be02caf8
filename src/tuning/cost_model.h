// The alpha-beta-gamma cost model: how long each schedule takes for one call.
// The schedule table (schedule/schedules.h) gives each schedule's steps and
// bytes (schedule/step_cost.h); this prices them with the calibrated
// parameters. The planner compares the prices to pick an algorithm and a
// chunk size; docs/tuning.md explains every formula.
#pragma once

#include <cstddef>
#include <cstdint>

#include "schedule/generate.h"
#include "schedule/schedules.h"
#include "schedule/step_cost.h"

namespace braid::tuning {

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

double costSeconds(const schedule::StepCost& cost, const CostParams& params);

// n, the size the formulas take, from NCCL's per-call count:
//   AllReduce, Broadcast, Reduce, Send, Recv: count * elemSize (the buffer)
//   ReduceScatter, AllGather, AllToAll:       count * elemSize * nranks (the
//                                             whole input / output of a rank)
//   Gather, Scatter:                          count * elemSize (one rank's block)
double modelBytes(schedule::Collective coll, size_t count, size_t elemSize, int nranks);

// The formula for (coll, algo) from the schedule table; false when braid has
// no schedule for the pair.
bool modelCost(schedule::Collective coll, schedule::Algorithm algo, const schedule::ModelShape& s,
               schedule::StepCost* out);
// Seconds for (coll, algo), or +infinity when the model has no formula.
double predictSeconds(schedule::Collective coll, schedule::Algorithm algo, const schedule::ModelShape& s,
                      const CostParams& p);
// Whether chunks smaller than a slot can make (coll, algo) faster: pipelines
// whose fill time grows with the chunk (chains and trees).
bool isPipelined(schedule::Collective coll, schedule::Algorithm algo);

}  // namespace braid::tuning
