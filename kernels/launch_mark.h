// Marks the start of each launch of a CUDA graph that captured a plan kernel,
// for the host's watch of it (src/engine/device/cuda_lane_launch.cc): one
// thread counts the launch in a word of mapped pinned memory, then zeroes the
// lanes' beacons there, before the plan kernel runs. The host sees a new
// count and watches that launch; no host function sits in the graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/result.h"

namespace braid::kernels {

// `count` and `beacons` (`words` 64-bit words) are device pointers of mapped
// memory. The count goes up before any beacon word is zeroed, and both are
// visible to the host before the kernel ends. Refuses while the thread holds
// an earlier CUDA error (kernels/launch_error.h).
Result launchMarkLaunch(volatile uint64_t* count, volatile uint64_t* beacons, uint32_t words, cudaStream_t stream);

// Loads the kernel's code on the current device now (kernels/launch_error.h).
Result loadMarkLaunchKernel();

}  // namespace braid::kernels
