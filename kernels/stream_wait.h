// Holds a stream until the host says its data is ready: one thread spins on a
// word of mapped pinned host memory (cudaHostAllocMapped) until it reaches
// `target`, or until the abort word is set. The device path of stage 1 puts it
// between the copy of a rank's contribution to the host and the copy of the
// result back (src/runtime/device).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace braid {

// Device pointers of the mapped words (cudaHostGetDevicePointer).
cudaError_t launchStreamWait(const volatile uint64_t* published, uint64_t target,
                             const volatile uint32_t* abortWord, cudaStream_t stream);

}  // namespace braid
