// Device buffers under BRAID_DEVICE_ENGINE=kernels where every rank is on this host:
// the group's plans run as plan kernels (kernels/executor/plan_kernel.h) on
// the users' streams, over FIFOs in device memory shared by pointer or CUDA
// IPC. One launch per stream runs the lanes of every communicator whose calls
// of the group are on that stream. CUDA builds only.
#pragma once

#include <vector>

#include "base/result.h"
#include "engine/task.h"

namespace braid::device {

// Enqueues the group and returns. A communicator's calls of one group must
// share a stream. A group a CUDA graph captures (one capture takes all its
// streams: cuda_device_path.cc) is captured, each launch of the graph
// watched. Failures of a lane reach ncclCommGetAsyncError; ncclCommAbort
// ends waiting kernels.
Result launchDeviceLanes(const std::vector<engine::Task>& tasks);

}  // namespace braid::device
