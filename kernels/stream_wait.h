// Holds a stream until the host says its data is ready: one thread spins on a
// word of mapped pinned host memory (cudaHostAllocMapped) until it reaches a
// target, or until the abort word is set. The device path of stage 1 puts it
// between the copy of a rank's contribution to the host and the copy of the
// result back (src/engine/device).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "base/result.h"

namespace braid::kernels {

// Device pointers of the mapped words (cudaHostGetDevicePointer). The target
// is known when the call is enqueued. Refuses while the thread holds an
// earlier CUDA error (kernels/launch_error.h).
Result launchStreamWait(const volatile uint64_t* published, uint64_t target,
                             const volatile uint32_t* abortWord, cudaStream_t stream);

// The same with the target read, when the kernel starts, from a mapped word:
// for a call captured in a CUDA graph, whose target (the ticket of one launch)
// the host writes there each time the graph runs, before the kernel in stream
// order.
// Loads both kernels' code on the current device now, so that no launch
// loads it (kernels/launch_error.h says why).
Result loadStreamWaitKernels();

Result launchStreamWaitIndirect(const volatile uint64_t* published, const volatile uint64_t* target,
                                     const volatile uint32_t* abortWord, cudaStream_t stream);

}  // namespace braid::kernels
