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

// What every launch on a device needs to know of it, asked once (the kernel
// and the device never change) rather than by each launch.
struct PlanDevice {
  int device = 0;
  // It launches cooperatively: every block resident at once, or a launch
  // error instead of lanes that wait for ever.
  bool cooperative = false;
  int major = 0;  // compute capability: fp8 steps need 9.0
  int minor = 0;
  // How many lanes (blocks of the threadsPerLane asked for) it holds resident
  // at once: a launch of more could leave lanes waiting for ever on lanes
  // that never start.
  uint32_t residentLanes = 0;
};

// The current device's, for lanes of threadsPerLane threads.
Result queryPlanDevice(uint32_t threadsPerLane, PlanDevice* out);

// Enqueues one kernel on `dev` (the current device) whose block b runs
// lanes[b] with threadsPerLane threads and writes its ExecStatus to
// statuses[b] (when statuses is not null); a failed lane also raises
// *lanes[b].failure to its status. `lanes`, `statuses` and every pointer the
// lanes hold (steps, ports, buffers, stages, FIFOs, the abort word) must be
// device-accessible. `anyFp8`: some operation is fp8, which needs sm_90 or
// newer. Lanes that wait for each other must be in one launch, of at most
// dev.residentLanes lanes: a block spins until its peer's message arrives.
// Launched cooperatively where the device supports it. `image` (optional):
// the first image->words words of `lanes`' block, which the launch carries
// and block 0 writes there before any lane starts (launch_image.h); it may be
// reused as soon as this returns.
Result launchPlanLanes(const PlanDevice& dev, executor::LaneExec* lanes, uint32_t nlanes, uint32_t threadsPerLane,
                       int32_t* statuses, bool anyFp8, cudaStream_t stream, const LaunchImage* image = nullptr);

// Loads the kernel's code on the current device now, so that no launch loads
// it (kernels/launch_error.h says why).
Result loadPlanKernel();

// As above, on the current device (asked now), for lanes whose operations
// are all of `type`.
Result launchPlanLanes(ncclDataType_t type, executor::LaneExec* lanes, uint32_t nlanes, uint32_t threadsPerLane,
                       int32_t* statuses, cudaStream_t stream);

}  // namespace braid::executor
