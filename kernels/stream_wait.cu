#include "kernels/stream_wait.h"

namespace braid {

namespace {

// Volatile loads go to host memory every time; the sleep keeps the polling
// from flooding the bus while the host works.
__global__ void streamWaitKernel(const volatile uint64_t* published, uint64_t target,
                                 const volatile uint32_t* abortWord) {
  while (*published < target && *abortWord == 0) __nanosleep(500);
}

}  // namespace

cudaError_t launchStreamWait(const volatile uint64_t* published, uint64_t target,
                             const volatile uint32_t* abortWord, cudaStream_t stream) {
  (void)cudaGetLastError();  // a stale error of an earlier call is not this launch's
  streamWaitKernel<<<1, 1, 0, stream>>>(published, target, abortWord);
  return cudaGetLastError();
}

}  // namespace braid
