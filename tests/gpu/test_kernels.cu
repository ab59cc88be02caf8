#include "test_kernels.h"

namespace gputest {

namespace {

__device__ uint64_t nowNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void gateThenFill(const volatile int* gate, int32_t* out, size_t n, int32_t value,
                             volatile int* timedOut, uint64_t limitNs) {
  if (threadIdx.x == 0) {
    const uint64_t start = nowNs();
    while (*gate == 0) {
      if (nowNs() - start > limitNs) {
        *timedOut = 1;
        break;
      }
      __nanosleep(1000);
    }
  }
  __syncthreads();
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = value;
}

}  // namespace

cudaError_t launchGateThenFill(const volatile int* gate, int32_t* out, size_t n, int32_t value,
                               volatile int* timedOut, uint64_t limitNs, cudaStream_t stream) {
  gateThenFill<<<1, 256, 0, stream>>>(gate, out, n, value, timedOut, limitNs);
  return cudaGetLastError();
}

}  // namespace gputest
