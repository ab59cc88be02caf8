// Reproducible mode on device buffers (core/reproducible.cc): a thread per
// rank, under the fake runtime and its recorder. The results on device
// buffers have the same bits as the same calls on host buffers, on every
// rank, and mixed buffers are refused.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>
// braid.h after nccl.h: its extensions take NCCL's types.
#include <braid.h>

#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kRanks = 3;
constexpr size_t kCount = 1031;

std::vector<float> contribution(int rank, size_t n) {
  std::mt19937 rng(77u + unsigned(rank));
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(1.0f + float(rng() % 1000) / 1000.0f, int(rng() % 41) - 20) * (rng() % 2 ? 1 : -1);
  return v;
}

TEST(ReproducibleDevice, DeviceBuffersGiveTheHostBuffersBits) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ncclComm_t comms[kRanks] = {};
  int devs[kRanks] = {};
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
  for (ncclComm_t c : comms) ASSERT_EQ(braidCommSetReproducible(c, 1), ncclSuccess);
  std::vector<std::vector<float>> onHost(kRanks), onDevice(kRanks), scatteredHost(kRanks), scatteredDevice(kRanks);
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      auto fail = [&](const std::string& what) { errors[r] = what + ": " + ncclGetLastError(comms[r]); };
      if (cudaSetDevice(0) != cudaSuccess) return fail("cudaSetDevice");
      cudaStream_t stream = nullptr;
      if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return fail("stream");
      // Host buffers.
      onHost[r] = contribution(r, kCount);
      if (ncclAllReduce(onHost[r].data(), onHost[r].data(), kCount, ncclFloat32, ncclSum, comms[r], stream) !=
          ncclSuccess)
        return fail("host allreduce");
      const std::vector<float> all = contribution(10 + r, kCount * kRanks);
      scatteredHost[r].resize(kCount);
      if (ncclReduceScatter(all.data(), scatteredHost[r].data(), kCount, ncclFloat32, ncclAvg, comms[r], stream) !=
          ncclSuccess)
        return fail("host reduce-scatter");
      // The same on device buffers.
      float *buf = nullptr, *in = nullptr, *out = nullptr;
      if (cudaMalloc(&buf, kCount * sizeof(float)) != cudaSuccess ||
          cudaMalloc(&in, all.size() * sizeof(float)) != cudaSuccess ||
          cudaMalloc(&out, kCount * sizeof(float)) != cudaSuccess)
        return fail("cudaMalloc");
      const std::vector<float> mine = contribution(r, kCount);
      cudaMemcpyAsync(buf, mine.data(), kCount * sizeof(float), cudaMemcpyHostToDevice, stream);
      cudaMemcpyAsync(in, all.data(), all.size() * sizeof(float), cudaMemcpyHostToDevice, stream);
      // Queued after the copies on the same stream: the call waits for them.
      if (ncclAllReduce(buf, buf, kCount, ncclFloat32, ncclSum, comms[r], stream) != ncclSuccess)
        return fail("device allreduce");
      if (ncclReduceScatter(in, out, kCount, ncclFloat32, ncclAvg, comms[r], stream) != ncclSuccess)
        return fail("device reduce-scatter");
      onDevice[r].resize(kCount);
      scatteredDevice[r].resize(kCount);
      cudaMemcpy(onDevice[r].data(), buf, kCount * sizeof(float), cudaMemcpyDeviceToHost);
      cudaMemcpy(scatteredDevice[r].data(), out, kCount * sizeof(float), cudaMemcpyDeviceToHost);
      // A device send buffer with a host receive buffer is refused.
      std::vector<float> host(kCount);
      if (ncclAllReduce(buf, host.data(), kCount, ncclFloat32, ncclSum, comms[r], stream) != ncclInvalidArgument)
        errors[r] = "mixed buffers were not refused";
      cudaFree(buf);
      cudaFree(in);
      cudaFree(out);
      cudaStreamDestroy(stream);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(std::memcmp(onDevice[r].data(), onHost[r].data(), kCount * sizeof(float)), 0) << "allreduce, rank " << r;
    EXPECT_EQ(std::memcmp(onDevice[r].data(), onDevice[0].data(), kCount * sizeof(float)), 0) << "rank " << r;
    EXPECT_EQ(std::memcmp(scatteredDevice[r].data(), scatteredHost[r].data(), kCount * sizeof(float)), 0)
        << "reduce-scatter, rank " << r;
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

}  // namespace
