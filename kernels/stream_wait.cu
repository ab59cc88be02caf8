#include "kernels/stream_wait.h"

#include "kernels/launch_error.h"

namespace braid::kernels {

namespace {

// Volatile loads go to host memory every time; the sleep keeps the polling
// from flooding the bus while the host works.
__device__ void waitFor(const volatile uint64_t* published, uint64_t target, const volatile uint32_t* abortWord) {
  while (*published < target && *abortWord == 0) __nanosleep(500);
}

__global__ void streamWaitKernel(const volatile uint64_t* published, uint64_t target,
                                 const volatile uint32_t* abortWord) {
  waitFor(published, target, abortWord);
}

// The host wrote the target before the work ahead of this kernel on its stream
// completed (a host function), so one read sees this launch's value.
__global__ void streamWaitIndirectKernel(const volatile uint64_t* published, const volatile uint64_t* target,
                                         const volatile uint32_t* abortWord) {
  waitFor(published, *target, abortWord);
}

}  // namespace

Result loadStreamWaitKernels() {
  cudaFuncAttributes attr{};
  BRAID_TRY(loadResult("stream-wait kernel", cudaFuncGetAttributes(&attr, streamWaitKernel)));
  return loadResult("stream-wait kernel", cudaFuncGetAttributes(&attr, streamWaitIndirectKernel));
}

Result launchStreamWait(const volatile uint64_t* published, uint64_t target, const volatile uint32_t* abortWord,
                        cudaStream_t stream) {
  BRAID_TRY(refuseOnPendingError("stream-wait kernel"));
  streamWaitKernel<<<1, 1, 0, stream>>>(published, target, abortWord);
  return launchResult("stream-wait kernel", cudaGetLastError());
}

Result launchStreamWaitIndirect(const volatile uint64_t* published, const volatile uint64_t* target,
                                const volatile uint32_t* abortWord, cudaStream_t stream) {
  BRAID_TRY(refuseOnPendingError("stream-wait kernel"));
  streamWaitIndirectKernel<<<1, 1, 0, stream>>>(published, target, abortWord);
  return launchResult("stream-wait kernel", cudaGetLastError());
}

}  // namespace braid::kernels
