// The plan kernel's element loops against the GPU's own copy, in one run
// (issue 17's bar: the reduce loop at >= 85% of the device-to-device copy's
// bandwidth). Three ways over the same float32 buffers of `bytes` each:
//   memcpy   cudaMemcpyAsync device to device             2 x bytes moved
//   copy     executor::applyCopy, the plan kernel's copy   2 x bytes moved
//   reduce   executor::applyReduce, sum of two inputs      3 x bytes moved
// each block a contiguous slice, with the plan kernel's block group and 256
// threads a block (cuda_lane_launch.cc), for several grid sizes. Prints GB/s
// of bytes moved (read + written) and each loop's ratio to memcpy's.
//
//   reduce_copy_bench [bytes (default 1G, suffixes K M G)] [iterations (20)]
//
// A plain program, not Google Benchmark: the GPU machine has no libbenchmark.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/executor/device_memory_model.h"
#include "kernels/executor/element_ops.h"
#include "reduce/host_reduce.h"

namespace {

using braid::executor::BlockGroup;

constexpr uint32_t kThreads = 256;  // the plan kernel's threads per lane

// Each block's slice, in whole 16-byte vectors but the last block's tail.
__device__ void sliceOf(uint64_t n, uint64_t* from, uint64_t* count) {
  const uint64_t per = ((n + gridDim.x - 1) / gridDim.x + 3) / 4 * 4;
  const uint64_t begin = per * blockIdx.x;
  *from = begin < n ? begin : n;
  *count = begin < n ? (n - begin < per ? n - begin : per) : 0;
}

__global__ void fillKernel(float* p, uint64_t n, float v) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x) p[i] = v;
}

__global__ void copyKernel(float* d, const float* s, uint64_t n, braid::reduce::RedOp op) {
  uint64_t from = 0, count = 0;
  sliceOf(n, &from, &count);
  braid::executor::applyCopy(BlockGroup(), op, d + from, s + from, count, false, false);
}

__global__ void reduceKernel(float* d, const float* a, const float* b, uint64_t n, braid::reduce::RedOp op) {
  uint64_t from = 0, count = 0;
  sliceOf(n, &from, &count);
  braid::executor::applyReduce(BlockGroup(), op, d + from, a + from, b + from, count, false, false);
}

bool check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "reduce_copy_bench: %s: %s (%s)\n", what, cudaGetErrorName(err), cudaGetErrorString(err));
  return false;
}

uint64_t parseBytes(const char* s) {
  char* end = nullptr;
  uint64_t v = std::strtoull(s, &end, 10);
  if (*end == 'K' || *end == 'k') v <<= 10;
  if (*end == 'M' || *end == 'm') v <<= 20;
  if (*end == 'G' || *end == 'g') v <<= 30;
  return v;
}

// Milliseconds per run of `launch`, after one untimed run.
template <class Launch>
bool timeIt(int iterations, Launch launch, float* ms) {
  cudaEvent_t start = nullptr, stop = nullptr;
  bool ok = check(cudaEventCreate(&start), "cudaEventCreate") && check(cudaEventCreate(&stop), "cudaEventCreate");
  if (ok) {
    launch();
    ok = check(cudaEventRecord(start), "cudaEventRecord");
    for (int i = 0; ok && i < iterations; ++i) launch();
    ok = ok && check(cudaGetLastError(), "launch") && check(cudaEventRecord(stop), "cudaEventRecord") &&
         check(cudaEventSynchronize(stop), "cudaEventSynchronize") &&
         check(cudaEventElapsedTime(ms, start, stop), "cudaEventElapsedTime");
    *ms /= float(iterations);
  }
  if (start != nullptr) (void)cudaEventDestroy(start);
  if (stop != nullptr) (void)cudaEventDestroy(stop);
  return ok;
}

// Device buffers freed on every path.
struct DeviceFloats {
  float* p = nullptr;
  explicit DeviceFloats(uint64_t n) { (void)check(cudaMalloc(&p, n * sizeof(float)), "cudaMalloc"); }
  ~DeviceFloats() {
    if (p != nullptr) (void)cudaFree(p);
  }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
};

}  // namespace

int main(int argc, char** argv) {
  const uint64_t bytes = argc > 1 ? parseBytes(argv[1]) : (uint64_t(1) << 30);
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 20;
  const uint64_t n = bytes / sizeof(float);
  if (n == 0 || iterations <= 0) {
    std::fprintf(stderr, "usage: reduce_copy_bench [bytes, e.g. 1G] [iterations]\n");
    return 2;
  }
  int device = 0, sms = 0;
  cudaDeviceProp prop{};
  if (!check(cudaGetDevice(&device), "cudaGetDevice") ||
      !check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties"))
    return 1;
  sms = prop.multiProcessorCount;
  DeviceFloats a(n), b(n), d(n);
  if (a.p == nullptr || b.p == nullptr || d.p == nullptr) return 1;
  fillKernel<<<sms * 4, kThreads>>>(a.p, n, 1.0f);
  fillKernel<<<sms * 4, kThreads>>>(b.p, n, 2.0f);
  if (!check(cudaDeviceSynchronize(), "filling the inputs")) return 1;
  braid::reduce::RedOp op;  // float32 sum

  float memcpyMs = 0;
  if (!timeIt(iterations, [&] { (void)cudaMemcpyAsync(d.p, a.p, n * sizeof(float), cudaMemcpyDeviceToDevice); },
              &memcpyMs))
    return 1;
  const double memcpyGBs = 2.0 * double(bytes) / (memcpyMs * 1e6);
  std::printf("# %s, %d SMs; %llu bytes a buffer, %d iterations; GB/s of bytes read + written\n", prop.name, sms,
              (unsigned long long)bytes, iterations);
  std::printf("%-8s %7s %10s %10s %8s\n", "loop", "blocks", "time_us", "GB/s", "vs_copy");
  std::printf("%-8s %7s %10.1f %10.1f %8.3f\n", "memcpy", "-", memcpyMs * 1e3, memcpyGBs, 1.0);
  for (int perSm : {1, 2, 4, 8, 16}) {
    const uint32_t blocks = uint32_t(sms * perSm);
    float copyMs = 0, reduceMs = 0;
    if (!timeIt(iterations, [&] { copyKernel<<<blocks, kThreads>>>(d.p, a.p, n, op); }, &copyMs) ||
        !timeIt(iterations, [&] { reduceKernel<<<blocks, kThreads>>>(d.p, a.p, b.p, n, op); }, &reduceMs))
      return 1;
    const double copyGBs = 2.0 * double(bytes) / (copyMs * 1e6);
    const double reduceGBs = 3.0 * double(bytes) / (reduceMs * 1e6);
    std::printf("%-8s %7u %10.1f %10.1f %8.3f\n", "copy", blocks, copyMs * 1e3, copyGBs, copyGBs / memcpyGBs);
    std::printf("%-8s %7u %10.1f %10.1f %8.3f\n", "reduce", blocks, reduceMs * 1e3, reduceGBs,
                reduceGBs / memcpyGBs);
  }
  // The last reduce's result, every element: a fast wrong loop is no figure.
  std::vector<float> out(n);
  if (!check(cudaMemcpy(out.data(), d.p, n * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy")) return 1;
  for (uint64_t i = 0; i < n; ++i) {
    if (out[i] != 3.0f) {
      std::fprintf(stderr, "reduce_copy_bench: WRONG: element %llu is %g, not 1 + 2\n", (unsigned long long)i,
                   double(out[i]));
      return 1;
    }
  }
  std::printf("# the reduce's result checked: every element 1 + 2\n");
  return 0;
}
