// What a kernel launch reports. The CUDA runtime keeps one "last error" per
// host thread, shared with the application: an error pending before braid
// launches is the application's (or an earlier call's). A launch then refuses
// with a message saying so and leaves the error for its owner; only an error
// raised by the launch itself is reported as the launch's.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "base/result.h"

namespace braid {

inline Result refuseOnPendingError(const char* kernel) {
  const cudaError_t pending = cudaPeekAtLastError();  // peek: the error stays
  if (pending == cudaSuccess) return Result::success();
  return Result(ncclUnhandledCudaError, std::string(kernel) + ": not launched: the CUDA runtime holds an earlier " +
                                            "error of this thread (" + cudaGetErrorName(pending) + ": " +
                                            cudaGetErrorString(pending) + "), left for the code that caused it");
}

inline Result launchResult(const char* kernel, cudaError_t err) {
  if (err == cudaSuccess) return Result::success();
  return Result(ncclUnhandledCudaError,
                std::string(kernel) + " failed to launch: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

}  // namespace braid
