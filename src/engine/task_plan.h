// How one recorded call becomes a plan: the planner's inputs (identical on
// every rank, so that all choose alike) and the schedule at the rank's
// position. Used by the engine's lane programs and the cost model.
#pragma once

#include "engine/task.h"
#include "schedule/generate.h"
#include "tuning/planner.h"

namespace braid::engine {

tuning::TuningInput tuningInputOf(const Task& t);

// The format of the call's messages: the communicator's wire type
// (CommSettings::wireType) for float32 sums and averages (allreduce,
// reduce-scatter, reduce) over more than one rank; Fixed64 for reproducible
// mode's exact sums (Task::fixedShifts); else None.
reduce::WireType wireTypeFor(const Task& t);
// `nchannels` > 0 replaces the communicator's channel count (plan kernels
// choose theirs per call: tuning/device_channels.h). `peerAccess`: the call
// may address its peers' buffers (engine/lanes/peer_access.h).
schedule::CollShape shapeOf(const Task& t, int nchannels = 0, bool peerAccess = false);

}  // namespace braid::engine
