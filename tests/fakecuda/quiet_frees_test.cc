// A communicator destroyed while another one's kernel waits: its pinned and
// device memory must not be freed then (cudaFreeHost and cudaFree may wait
// for the whole device, base/cuda_quiet_free.h). The recorder fails the test
// on any such free; the memory is kept and freed once no kernel of braid's is
// outstanding.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "fakecuda.h"

namespace {

constexpr size_t kCount = 4096;

void initPair(const char* engine, ncclComm_t* comms) {
  setenv("BRAID_DEVICE_ENGINE", engine, 1);
  int devs[2] = {0, 0};
  ASSERT_EQ(ncclCommInitAll(comms, 2, devs), ncclSuccess) << ncclGetLastError(nullptr);
  unsetenv("BRAID_DEVICE_ENGINE");
}

class QuietFrees : public testing::TestWithParam<const char*> {};

TEST_P(QuietFrees, ADestructionWhileAnotherCommunicatorsKernelWaitsFreesNothingUntilItEnds) {
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  const uint64_t allocatedBefore = fakecuda::pinnedAllocations();
  const uint64_t freedBefore = fakecuda::pinnedFrees();
  ncclComm_t a[2] = {}, b[2] = {};
  ASSERT_NO_FATAL_FAILURE(initPair(GetParam(), a));
  ASSERT_NO_FATAL_FAILURE(initPair(GetParam(), b));
  int32_t* bufs[2] = {};
  cudaStream_t streams[2] = {};
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&bufs[r], kCount * sizeof(int32_t)), cudaSuccess);
    const std::vector<int32_t> init(kCount, r + 1);
    ASSERT_EQ(cudaMemcpy(bufs[r], init.data(), kCount * sizeof(int32_t), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // Pair b's FIFOs first (plan kernels connect them on a shape's first call,
  // with both ranks), from a thread per rank.
  std::vector<std::thread> warm;
  for (int r = 0; r < 2; ++r)
    warm.emplace_back([&, r] {
      cudaSetDevice(0);
      EXPECT_EQ(ncclAllReduce(bufs[r], bufs[r], kCount, ncclInt32, ncclSum, b[r], streams[r]), ncclSuccess);
      EXPECT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess);
    });
  for (auto& t : warm) t.join();
  // Rank 0 of pair b calls; its kernel waits for rank 1, which has not yet.
  std::thread first([&] {
    cudaSetDevice(0);
    EXPECT_EQ(ncclAllReduce(bufs[0], bufs[0], kCount, ncclInt32, ncclSum, b[0], streams[0]), ncclSuccess);
  });
  first.join();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // Pair a goes meanwhile: nothing of it may be freed yet (the recorder fails
  // the test on a free while the kernel waits).
  EXPECT_EQ(ncclCommDestroy(a[0]), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(a[1]), ncclSuccess);
  EXPECT_EQ(fakecuda::pinnedFrees(), freedBefore) << "a destruction freed memory while a kernel of braid's waited";
  // Rank 1 joins; both calls end right.
  EXPECT_EQ(ncclAllReduce(bufs[1], bufs[1], kCount, ncclInt32, ncclSum, b[1], streams[1]), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess);
    std::vector<int32_t> got(kCount);
    ASSERT_EQ(cudaMemcpy(got.data(), bufs[r], kCount * sizeof(int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got[0], 6);  // 1 + 2 after the first call, twice that after the second
    EXPECT_EQ(got[kCount - 1], 6);
  }
  EXPECT_EQ(ncclCommDestroy(b[0]), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(b[1]), ncclSuccess);
  // Once no kernel waits, everything both pairs made is freed.
  EXPECT_EQ(fakecuda::pinnedFrees() - freedBefore, fakecuda::pinnedAllocations() - allocatedBefore)
      << "the kept memory was not freed once no kernel waited";
  for (int r = 0; r < 2; ++r) {
    cudaFree(bufs[r]);
    cudaStreamDestroy(streams[r]);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, QuietFrees, testing::Values("staged", "kernels"),
                         [](const testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

}  // namespace
