#include "kernels/launch_mark.h"

#include "kernels/launch_error.h"

namespace braid::kernels {

namespace {

// The system-scope fence orders the count before the zeroes for the host (a
// watch that reads a zeroed beacon then reads the new count), and the zeroes
// before the plan kernel's first beacon write.
__global__ void markLaunchKernel(volatile uint64_t* count, volatile uint64_t* beacons, uint32_t words) {
  *count = *count + 1;
  __threadfence_system();
  for (uint32_t i = 0; i < words; ++i) beacons[i] = 0;
  __threadfence_system();
}

}  // namespace

Result loadMarkLaunchKernel() {
  cudaFuncAttributes attr{};
  return loadResult("launch-mark kernel", cudaFuncGetAttributes(&attr, markLaunchKernel));
}

Result launchMarkLaunch(volatile uint64_t* count, volatile uint64_t* beacons, uint32_t words, cudaStream_t stream) {
  BRAID_TRY(refuseOnPendingError("launch-mark kernel"));
  markLaunchKernel<<<1, 1, 0, stream>>>(count, beacons, words);
  return launchResult("launch-mark kernel", cudaGetLastError());
}

}  // namespace braid::kernels
