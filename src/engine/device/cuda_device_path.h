// Shared by the staged device path and the plan kernels of the device lanes.
#pragma once

#include <vector>

#include "base/result.h"
#include "engine/device/cuda_proxy.h"
#include "engine/task.h"

namespace braid::device {

// The device that holds `ptr` (device or managed memory), or -1.
int deviceOfPointer(const void* ptr);

// The device of the calls tasks[mine] (one communicator's): that of their
// first device buffer (-1 when they have none); every other buffer must be on
// it too.
Result deviceOfCalls(const std::vector<engine::Task>& tasks, const std::vector<size_t>& mine, int* device);

// The communicator's proxy (made by its first device call) on `device`.
Result proxyFor(ncclComm* comm, int device, DeviceProxy** out);

}  // namespace braid::device
