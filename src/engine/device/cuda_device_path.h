// Shared by the staged device path and the plan kernels of the device lanes.
#pragma once

#include <vector>

#include "base/result.h"
#include "engine/device/cuda_proxy.h"
#include "engine/task.h"

namespace braid::device {

// The device of the calls tasks[mine] (one communicator's), from each call's
// Task::device (classifyGroup's): that of the first call with buffers (-1
// when none has any); every other call's must be it too.
Result deviceOfCalls(const std::vector<engine::Task>& tasks, const std::vector<size_t>& mine, int* device);

// The communicator's proxy (made by its first device call) on `device`.
Result proxyFor(ncclComm* comm, int device, DeviceProxy** out);

}  // namespace braid::device
