// Every schedule braid has, one row per (collective, algorithm): how to
// generate it and what it costs (step_cost.h). The generator, the planner's
// choice of algorithms and the cost model all read this one table, so a
// schedule added here is both generated and priced.
#pragma once

#include "schedule/generate.h"
#include "schedule/step_cost.h"

namespace braid::schedule {

struct Schedule {
  Collective coll;
  Algorithm algorithm;
  void (*generate)(const CollShape& s, Plan* plan);  // over positions (rank_order.h)
  StepCost (*cost)(const ModelShape& s);
  bool pipelined;  // chunks smaller than a slot can pay off (chains and trees)
};

// The row for (coll, algorithm); null when braid has no such schedule.
const Schedule* findSchedule(Collective coll, Algorithm algorithm);

}  // namespace braid::schedule
