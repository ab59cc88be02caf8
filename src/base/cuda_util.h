// CUDA runtime helpers of the CUDA build (the device engine, the P2P
// transport): errors as Results, the current device per scope, uploads that wait.
#pragma once

#include <cuda_runtime_api.h>

#include <mutex>

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

// `bytes` of mapped pinned host memory that the device addresses at the
// host's pointer (unified addressing): plan kernels and host threads follow
// the same pointers in it. `what` names its use in the error.
Result allocateMappedAtHostAddress(size_t bytes, const char* what, char** out);

// Copies host memory into device memory and waits for that copy only,
// through a pinned buffer and a private non-blocking stream made by
// prepare(). Never from pageable memory, which the driver stages itself:
// on an H200, a thread rank copying its new Port from pageable memory waited
// inside the driver, for ever, while the other thread rank's application
// thread copied a result back to pageable memory from behind a kernel that
// waited for this rank; from pinned memory it did not. Call prepare() before
// any kernel of the process may wait for this thread (cudaHostAlloc may wait
// for the device); copy() prepares on first use otherwise.
class PinnedUpload {
 public:
  static constexpr size_t kChunkBytes = size_t(256) << 10;

  PinnedUpload() = default;
  ~PinnedUpload();
  PinnedUpload(const PinnedUpload&) = delete;
  PinnedUpload& operator=(const PinnedUpload&) = delete;

  // On the current device, once.
  Result prepare();
  // `dst` on the device current at prepare(); `bytes` of any size, in chunks.
  Result copy(void* dst, const void* src, size_t bytes);

 private:
  Result prepareLocked();
  Result copyLocked(void* dst, const void* src, size_t bytes);

  std::mutex mu_;
  char* pinned_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace braid
