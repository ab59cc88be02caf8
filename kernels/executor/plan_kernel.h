// The device side of the plan interpreter: one block per lane. Built into
// braid_kernels when BRAID_CUDA is on; not called by libbraid yet (stage 2
// groundwork, kernels/README.md).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/result.h"
#include "kernels/executor/plan_interpreter.h"

namespace braid {
namespace kernels {

// Whether launchPlanLanes has a kernel for `type`: every NCCL datatype. fp8
// kernels exist only in sm_90+ code; launchPlanLanes refuses them
// (ncclInvalidArgument) when the current device is older, so a true here does
// not promise that an fp8 launch succeeds on every device.
bool planKernelSupportsType(ncclDataType_t type);

// Enqueues one kernel whose block b runs lanes[b] with threadsPerLane threads
// and writes its ExecStatus to statuses[b]. `lanes`, `statuses` and every
// pointer the lanes hold (steps, ports, buffers, stages, FIFOs, the abort
// word) must be device-accessible; every operation of every lane must be of
// datatype `type`. fp8 types need the current device to be sm_90 or newer.
// Lanes that wait for each other must be in one launch (or otherwise be
// resident together): a block spins until its peer's message arrives.
Result launchPlanLanes(ncclDataType_t type, exec::LaneExec* lanes, uint32_t nlanes, uint32_t threadsPerLane,
                       int32_t* statuses, cudaStream_t stream);

}  // namespace kernels
}  // namespace braid
