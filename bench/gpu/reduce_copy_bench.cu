// reduce_copy_bench: the device reduction kernel (kernels/reduce, the same
// functors as the host) against the device-to-device copy of the same GPU, in
// one run. Bytes count every read and write: a copy moves 2n, dst = a + b 3n.
// The GPU issue asks the reduce-copy to reach 85% of the copy's bandwidth.
//
//   reduce_copy_bench [max MiB (default 1024)] [device (default 0)]
//
// Prints one row per size and type; exits 2 without a GPU.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/reduce/device_reduce.h"

namespace {

#define CHECK_CUDA(call)                                                                   \
  do {                                                                                     \
    const cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) {                                                               \
      std::fprintf(stderr, "reduce_copy_bench: %s failed: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

constexpr int kIters = 20;

// Seconds per call of `enqueue`, over kIters calls after one warm-up.
template <class F>
double timeIt(cudaStream_t s, F enqueue) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  enqueue();
  CHECK_CUDA(cudaEventRecord(start, s));
  for (int i = 0; i < kIters; ++i) enqueue();
  CHECK_CUDA(cudaEventRecord(stop, s));
  CHECK_CUDA(cudaEventSynchronize(stop));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  return ms / 1e3 / kIters;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t maxBytes = size_t(argc > 1 ? std::atoll(argv[1]) : 1024) << 20;
  const int device = argc > 2 ? std::atoi(argv[2]) : 0;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::fprintf(stderr, "reduce_copy_bench: no CUDA device\n");
    return 2;
  }
  CHECK_CUDA(cudaSetDevice(device));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void *a, *b, *dst;
  CHECK_CUDA(cudaMalloc(&a, maxBytes));
  CHECK_CUDA(cudaMalloc(&b, maxBytes));
  CHECK_CUDA(cudaMalloc(&dst, maxBytes));
  CHECK_CUDA(cudaMemset(a, 0, maxBytes));
  CHECK_CUDA(cudaMemset(b, 0, maxBytes));
  std::printf("# reduce_copy_bench on %s (device %d): GB/s counting reads and writes\n", prop.name, device);
  std::printf("# %12s  %9s  %10s  %10s  %8s\n", "bytes", "type", "copy GB/s", "sum GB/s", "sum/copy");
  const struct {
    ncclDataType_t type;
    const char* name;
  } types[] = {{ncclFloat32, "float32"}, {ncclBfloat16, "bfloat16"}, {ncclFloat16, "float16"}};
  for (size_t bytes = size_t(1) << 20; bytes <= maxBytes; bytes *= 4) {
    const double copy = timeIt(s, [&] { CHECK_CUDA(cudaMemcpyAsync(dst, a, bytes, cudaMemcpyDeviceToDevice, s)); });
    for (const auto& t : types) {
      const braid::RedOp op = braid::makeBuiltinOp(ncclSum, t.type, 1);
      const size_t count = bytes / braid::typeSize(t.type);
      const double sum = timeIt(s, [&] {
        const braid::Result r = braid::kernels::launchReduce(op, dst, a, b, count, false, false, s);
        if (!r.ok()) {
          std::fprintf(stderr, "reduce_copy_bench: %s\n", r.message().c_str());
          std::exit(1);
        }
      });
      const double copyBw = 2.0 * double(bytes) / copy / 1e9, sumBw = 3.0 * double(bytes) / sum / 1e9;
      std::printf("  %12zu  %9s  %10.1f  %10.1f  %7.0f%%\n", bytes, t.name, copyBw, sumBw, 100 * sumBw / copyBw);
    }
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(dst);
  cudaStreamDestroy(s);
  return 0;
}
