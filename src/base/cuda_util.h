// CUDA runtime helpers of the CUDA build (the device engine, the P2P
// transport): errors as Results, the current device per scope, an upload.
#pragma once

#include <cuda_runtime_api.h>

#include "base/result.h"

namespace braid {

// ncclUnhandledCudaError naming the call that failed.
Result cudaFailure(const char* what, cudaError_t err);

#define BRAID_CUDA_TRY(call)                                           \
  do {                                                                 \
    const cudaError_t braid_cuda_err_ = (call);                        \
    if (braid_cuda_err_ != cudaSuccess) return ::braid::cudaFailure(#call, braid_cuda_err_); \
  } while (0)

// Makes `device` current for a scope, and restores the caller's device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  Result status() const { return status_; }

 private:
  int previous_ = -1;
  Result status_;
};

// Copies host memory to the current device and waits for that copy only, on
// a private non-blocking stream: a plain cudaMemcpy may return before a
// pageable copy's DMA is done, and the legacy stream would wait behind work
// on blocking streams (a spinning plan kernel among them).
Result copyToDeviceNow(void* dst, const void* src, size_t bytes);

}  // namespace braid
