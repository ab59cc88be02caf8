#include "base/cuda_util.h"

#include <algorithm>
#include <cstring>

#include "base/cuda_quiet_free.h"

namespace braid {

Result cudaFailure(const char* what, cudaError_t err) {
  return fail(ncclUnhandledCudaError, "%s failed: %s (%s)", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    cudaGetLastError();
    previous_ = -1;
  }
  if (previous_ == device) return;
  const cudaError_t err = cudaSetDevice(device);
  if (err != cudaSuccess) status_ = cudaFailure("cudaSetDevice", err);
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (previous_ >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

Result allocateMappedAtHostAddress(size_t bytes, const char* what, char** out) {
  void* host = nullptr;
  BRAID_CUDA_TRY(cudaHostAlloc(&host, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  void* device = nullptr;
  const cudaError_t err = cudaHostGetDevicePointer(&device, host, 0);
  if (err != cudaSuccess || device != host) {
    freeHostWhenQuiet(host);
    if (err != cudaSuccess) return cudaFailure("cudaHostGetDevicePointer", err);
    return fail(ncclSystemError, "pinned host memory is mapped at another device address (%p, host %p): %s "
                "need unified addressing", device, host, what);
  }
  *out = static_cast<char*>(host);
  return Result::success();
}

PinnedUpload::~PinnedUpload() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  freeHostWhenQuiet(pinned_);  // cudaFreeHost waits for the device
}

namespace {

// A failed CUDA call's error, taken off the thread so that it does not
// surface at a later launch's error check.
Result cleared(Result r) {
  if (r.code() == ncclUnhandledCudaError) cudaGetLastError();
  return r;
}

}  // namespace

Result PinnedUpload::prepare() {
  std::lock_guard<std::mutex> lock(mu_);
  return cleared(prepareLocked());
}

Result PinnedUpload::prepareLocked() {
  if (pinned_ != nullptr) return Result::success();
  void* p = nullptr;
  BRAID_CUDA_TRY(cudaHostAlloc(&p, kChunkBytes, cudaHostAllocPortable));
  const cudaError_t err = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
  if (err != cudaSuccess) {
    freeHostWhenQuiet(p);
    stream_ = nullptr;
    return cudaFailure("cudaStreamCreateWithFlags", err);
  }
  pinned_ = static_cast<char*>(p);
  return Result::success();
}

Result PinnedUpload::copy(void* dst, const void* src, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  return cleared(copyLocked(dst, src, bytes));
}

Result PinnedUpload::copyLocked(void* dst, const void* src, size_t bytes) {
  BRAID_TRY(prepareLocked());
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kChunkBytes, bytes - done);
    std::memcpy(pinned_, static_cast<const char*>(src) + done, n);
    BRAID_CUDA_TRY(cudaMemcpyAsync(static_cast<char*>(dst) + done, pinned_, n, cudaMemcpyHostToDevice, stream_));
    BRAID_CUDA_TRY(cudaStreamSynchronize(stream_));  // before the next chunk overwrites the pinned buffer
    done += n;
  }
  return Result::success();
}

}  // namespace braid
