#include "wire_loops_on_gpu.h"

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/executor/wire_step.h"

namespace gputest {
namespace {

using braid::reduce::WirePiece;

// Thread t of T runs groups f + t s, f + (t + T) s, ...: together, the piece's share.
__global__ void wirePieceKernel(WirePiece p) {
  const uint64_t t = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x;
  const uint64_t threads = uint64_t(gridDim.x) * blockDim.x;
  p.firstGroup += t * p.stride;
  p.stride *= threads;
  if (p.data == ncclBfloat16) {
    braid::executor::runWirePieceInBlock<braid::reduce::BFloat16>(p);
  } else {
    braid::executor::runWirePieceInBlock<float>(p);
  }
}

// A device copy of a host buffer, copied back by copyBack().
class DeviceCopy {
 public:
  DeviceCopy(const void* host, size_t bytes) : host_(const_cast<void*>(host)), bytes_(bytes) {
    if (host_ == nullptr) return;
    EXPECT_EQ(cudaMalloc(&dev_, bytes_ == 0 ? 1 : bytes_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(dev_, host_, bytes_, cudaMemcpyHostToDevice), cudaSuccess);
  }
  ~DeviceCopy() {
    if (dev_ != nullptr) cudaFree(dev_);
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  void* dev() const { return dev_; }
  void copyBack() const {
    if (dev_ != nullptr) EXPECT_EQ(cudaMemcpy(host_, dev_, bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
  }

 private:
  void* host_;
  size_t bytes_;
  void* dev_ = nullptr;
};

}  // namespace

void runWirePieceLoopsOnGpu(const WirePiece& p) {
  const size_t msgBytes = braid::reduce::wireBytes(p.wire, p.count);
  const size_t valueBytes = p.count * (p.data == ncclBfloat16 ? 2 : 4);
  DeviceCopy in(p.in, msgBytes), out(p.out, msgBytes), src(p.src, valueBytes);
  // In place: dst is src's own device copy.
  DeviceCopy dst(p.dst == p.src ? nullptr : p.dst, valueBytes);
  WirePiece d = p;
  d.in = static_cast<const uint8_t*>(in.dev());
  d.out = static_cast<uint8_t*>(out.dev());
  d.src = src.dev();
  d.dst = p.dst == nullptr ? nullptr : p.dst == p.src ? src.dev() : dst.dev();
  wirePieceKernel<<<2, 64>>>(d);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  out.copyBack();
  src.copyBack();
  dst.copyBack();
}

}  // namespace gputest
