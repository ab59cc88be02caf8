#include "base/cuda_util.h"

namespace braid {

namespace {

class ScopedStream {
 public:
  ScopedStream() = default;
  ~ScopedStream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  ScopedStream(const ScopedStream&) = delete;
  ScopedStream& operator=(const ScopedStream&) = delete;
  Result create() {
    BRAID_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    return Result::success();
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace

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

Result copyToDeviceNow(void* dst, const void* src, size_t bytes) {
  ScopedStream stream;
  BRAID_TRY(stream.create());
  BRAID_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream.get()));
  BRAID_CUDA_TRY(cudaStreamSynchronize(stream.get()));
  return Result::success();
}

}  // namespace braid
