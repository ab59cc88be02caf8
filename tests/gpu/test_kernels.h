// Kernels the device-path tests put on a stream before a collective.
#ifndef BRAID_TESTS_GPU_TEST_KERNELS_H_
#define BRAID_TESTS_GPU_TEST_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gputest {

// Waits until *gate (mapped host memory) is non-zero, then sets out[0..n) to
// `value`. Gives up after `limitNs` (sets *timedOut) so a broken library fails
// the test instead of hanging it.
cudaError_t launchGateThenFill(const volatile int* gate, int32_t* out, size_t n, int32_t value,
                               volatile int* timedOut, uint64_t limitNs, cudaStream_t stream);

}  // namespace gputest

#endif  // BRAID_TESTS_GPU_TEST_KERNELS_H_
