// How one recorded call becomes a plan: the planner's inputs (identical on
// every rank, so that all choose alike) and the schedule at the rank's
// position. Used by the engine's lane programs and the cost model.
#pragma once

#include "engine/task.h"
#include "schedule/generate.h"
#include "tuning/planner.h"

namespace braid {

TuningInput tuningInputOf(const Task& t);
CollShape shapeOf(const Task& t);

}  // namespace braid
