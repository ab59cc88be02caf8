// The device side of the plan interpreter: one block per lane, each step with
// its operation's datatype (typed_step.h), so a launch runs every lane of a
// group whatever datatypes its operations have. Built into braid_kernels when
// BRAID_CUDA is on; kernels/README.md says what calls it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/result.h"
#include "kernels/executor/launch_image.h"
#include "kernels/executor/plan_interpreter.h"

namespace braid::executor {

// Whether the kernel runs steps of `type`: every NCCL datatype. fp8 code
// exists only for sm_90+; launches refuse it (ncclInvalidArgument) when the
// current device is older, so a true here does not promise that an fp8
// launch succeeds on every device.
bool planKernelSupportsType(ncclDataType_t type);

// Enqueues one kernel whose block b runs lanes[b] with threadsPerLane threads
// and writes its ExecStatus to statuses[b] (when statuses is not null); a
// failed lane also raises *lanes[b].failure to its status. `lanes`, `statuses` and every
// pointer the lanes hold (steps, ports, buffers, stages, FIFOs, the abort
// word) must be device-accessible. `anyFp8`: some operation is fp8, which
// needs the current device to be sm_90 or newer. Lanes that wait for each
// other must be in one launch, of at most residentPlanLanes() lanes: a block
// spins until its peer's message arrives. Launched cooperatively where the
// device supports it (every block resident at once, or a launch error).
// `image` (optional): the first image->words words of `lanes`' block, which
// the launch carries and block 0 writes there before any lane starts
// (launch_image.h); it may be reused as soon as this returns.
Result launchPlanLanes(executor::LaneExec* lanes, uint32_t nlanes, uint32_t threadsPerLane, int32_t* statuses,
                       bool anyFp8, cudaStream_t stream, const LaunchImage* image = nullptr);

// Loads the kernel's code on the current device now, so that no launch loads
// it (kernels/launch_error.h says why).
Result loadPlanKernel();
// How many lanes (blocks of threadsPerLane threads) the current device holds
// resident at once: a launch of more could leave lanes waiting for ever on
// lanes that never start.
Result residentPlanLanes(uint32_t threadsPerLane, uint32_t* lanes);

// As above for lanes whose operations are all of `type`.
Result launchPlanLanes(ncclDataType_t type, executor::LaneExec* lanes, uint32_t nlanes, uint32_t threadsPerLane,
                       int32_t* statuses, cudaStream_t stream);

}  // namespace braid::executor
