// Ranks as threads that each drive their own communicator, as programs with
// a thread per GPU do: no group spans the ranks, so one rank's kernel may
// already wait for a peer that is still connecting or staging its call. On
// the fake runtime, under the recorder: calls of several sizes (new FIFOs,
// staging blocks of several sizes) queued on each rank's stream without a
// sync, on both device engines; the sums must be right and braid must make
// no synchronising CUDA call while one of its kernels is outstanding.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kRanks = 4;
constexpr int kRounds = 3;
const std::vector<size_t> kCounts = {256, 4096, 65536};  // int32: 1, 16 and 256 KiB

class ThreadRanks : public testing::TestWithParam<const char*> {};

TEST_P(ThreadRanks, QueuedCallsOfSeveralSizesFromAThreadPerRank) {
  setenv("BRAID_DEVICE_ENGINE", GetParam(), 1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ncclComm_t comms[kRanks] = {};
  int devs[kRanks] = {};
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
  unsetenv("BRAID_DEVICE_ENGINE");
  // The application's allocations come first: the recorder judges braid's.
  std::vector<std::vector<int32_t*>> bufs(kRanks);
  std::vector<cudaStream_t> streams(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    for (size_t n : kCounts) {
      int32_t* b = nullptr;
      ASSERT_EQ(cudaMalloc(&b, n * sizeof(int32_t)), cudaSuccess);
      const std::vector<int32_t> init(n, r + 1);
      ASSERT_EQ(cudaMemcpy(b, init.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice), cudaSuccess);
      bufs[r].push_back(b);
    }
  }
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      if (cudaSetDevice(0) != cudaSuccess) return void(errors[r] = "cudaSetDevice");
      for (int k = 0; k < kRounds; ++k)
        for (size_t i = 0; i < kCounts.size(); ++i)
          if (ncclAllReduce(bufs[r][i], bufs[r][i], kCounts[i], ncclInt32, ncclSum, comms[r], streams[r]) !=
              ncclSuccess)
            return void(errors[r] = std::string("ncclAllReduce: ") + ncclGetLastError(comms[r]));
      if (cudaStreamSynchronize(streams[r]) != cudaSuccess) errors[r] = "cudaStreamSynchronize";
    });
  for (auto& t : threads) t.join();
  int64_t want = int64_t(kRanks) * (kRanks + 1) / 2;
  for (int k = 1; k < kRounds; ++k) want *= kRanks;
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    for (size_t i = 0; i < kCounts.size(); ++i) {
      std::vector<int32_t> got(kCounts[i]);
      ASSERT_EQ(cudaMemcpy(got.data(), bufs[r][i], kCounts[i] * sizeof(int32_t), cudaMemcpyDeviceToHost),
                cudaSuccess);
      for (size_t e = 0; e < got.size(); ++e)
        ASSERT_EQ(got[e], want) << "rank " << r << ", " << kCounts[i] << " elements, element " << e;
    }
  }
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
    for (int32_t* b : bufs[r]) cudaFree(b);
    cudaStreamDestroy(streams[r]);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, ThreadRanks, testing::Values("staged", "kernels"),
                         [](const testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

}  // namespace
