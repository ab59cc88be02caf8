// What a kernel launch reports. The CUDA runtime keeps one "last error" per
// host thread, shared with the application: an error pending before braid
// launches is the application's (or an earlier call's). A launch then refuses
// with a message saying so and leaves the error for its owner; only an error
// raised by the launch itself is reported as the launch's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "base/result.h"

namespace braid::kernels {

inline Result refuseOnPendingError(const char* kernel) {
  const cudaError_t pending = cudaPeekAtLastError();  // peek: the error stays
  if (pending == cudaSuccess) return Result::success();
  return Result(ncclUnhandledCudaError, std::string(kernel) + ": not launched: the CUDA runtime holds an earlier " +
                                            "error of this thread (" + cudaGetErrorName(pending) + ": " +
                                            cudaGetErrorString(pending) + "), left for the code that caused it");
}

// Under CUDA's lazy loading (the default since CUDA 12.2) a kernel's code is
// loaded at its first launch, and loading may wait for the device to be idle:
// a kernel already spinning (braid's, or an application kernel that waits
// for the host to go on after braid's call returns) then never ends, and
// neither does the launch. Loading every kernel when a communicator first
// uses a device (cudaFuncGetAttributes loads the function) keeps loads off
// the launch path. Seen on an H200: the first device call of a process hung
// behind an application kernel that spun until the call returned.
inline Result loadResult(const char* kernel, cudaError_t err) {
  if (err == cudaSuccess) return Result::success();
  (void)cudaGetLastError();  // the failed query's, not the application's
  std::string msg = std::string("loading the ") + kernel + "'s code failed: " + cudaGetErrorName(err) + " (" +
                    cudaGetErrorString(err) + ")";
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidPtx)
    msg += "; braid's kernels were not built for this GPU: rebuild with -DBRAID_CUDA_ARCHS=<its SM>";
  return Result(ncclUnhandledCudaError, msg);
}

// A plan-kernel launch's block size: a lane's threads, at most a CUDA block.
inline Result checkThreadsPerLane(uint32_t threadsPerLane) {
  if (threadsPerLane == 0 || threadsPerLane > 1024)
    return Result(ncclInvalidArgument, "plan kernel: threadsPerLane must be 1..1024");
  return Result::success();
}

// How many blocks of `threads` threads of `kernel` the current device holds
// resident at once (its occupancy per multiprocessor times their number).
inline Result residentBlocks(const void* kernel, uint32_t threads, uint32_t* blocks) {
  int device = 0, perSm = 0, sms = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, kernel, int(threads), 0);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess)
    return Result(ncclUnhandledCudaError, std::string("plan kernel: occupancy query failed: ") + cudaGetErrorName(err) +
                                              " (" + cudaGetErrorString(err) + ")");
  *blocks = uint32_t(perSm) * uint32_t(sms);
  return Result::success();
}

inline Result launchResult(const char* kernel, cudaError_t err) {
  if (err == cudaSuccess) return Result::success();
  return Result(ncclUnhandledCudaError,
                std::string(kernel) + " failed to launch: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace braid::kernels
