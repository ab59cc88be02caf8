// Synchronous uploads that never wait behind other streams' work.
#include "runtime/device/cuda_util.h"

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

Result copyToDeviceNow(void* dst, const void* src, size_t bytes) {
  ScopedStream stream;
  BRAID_TRY(stream.create());
  BRAID_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream.get()));
  BRAID_CUDA_TRY(cudaStreamSynchronize(stream.get()));
  return Result::success();
}

}  // namespace braid
