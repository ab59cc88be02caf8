// One rank's device calls are device copies on its stream (engine/device,
// copySingleRankCalls): the right bytes, in and out of place, on both engines,
// and no kernel of braid's (neither a stream-wait nor a plan kernel), so no
// round trip through pinned memory and the proxy.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "fakecuda.h"

namespace {

class SingleRank : public testing::TestWithParam<const char*> {};

TEST_P(SingleRank, CollectivesAreCopiesWithoutKernels) {
  setenv("BRAID_DEVICE_ENGINE", GetParam(), 1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ncclComm_t comm = nullptr;
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &dev), ncclSuccess) << ncclGetLastError(nullptr);
  unsetenv("BRAID_DEVICE_ENGINE");
  constexpr size_t kCount = 4099;
  std::vector<float> in(kCount);
  for (size_t i = 0; i < kCount; ++i) in[i] = float(i) * 0.25f - 7.0f;
  float *send = nullptr, *recv = nullptr;
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&send, kCount * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&recv, kCount * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(send, in.data(), kCount * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  const uint64_t launchesBefore = fakecuda::launchesTracked();
  auto expectRecv = [&](const char* what) {
    std::vector<float> got(kCount, -1.0f);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), recv, kCount * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, in) << what;
    ASSERT_EQ(cudaMemset(recv, 0, kCount * sizeof(float)), cudaSuccess);
  };
  ASSERT_EQ(ncclAllReduce(send, recv, kCount, ncclFloat32, ncclAvg, comm, stream), ncclSuccess);
  expectRecv("allreduce avg");
  ASSERT_EQ(ncclReduce(send, recv, kCount, ncclFloat32, ncclMax, 0, comm, stream), ncclSuccess);
  expectRecv("reduce max");
  ASSERT_EQ(ncclBroadcast(send, recv, kCount, ncclFloat32, 0, comm, stream), ncclSuccess);
  expectRecv("broadcast");
  ASSERT_EQ(ncclAllGather(send, recv, kCount, ncclFloat32, comm, stream), ncclSuccess);
  expectRecv("allgather");
  ASSERT_EQ(ncclReduceScatter(send, recv, kCount, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  expectRecv("reducescatter");
  ASSERT_EQ(ncclAlltoAll(send, recv, kCount, ncclFloat32, comm, stream), ncclSuccess);
  expectRecv("alltoall");
  // In place: the buffer is left as it is.
  ASSERT_EQ(cudaMemcpy(recv, in.data(), kCount * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  ASSERT_EQ(ncclAllReduce(recv, recv, kCount, ncclFloat32, ncclSum, comm, stream), ncclSuccess);
  expectRecv("allreduce in place");
  EXPECT_EQ(fakecuda::launchesTracked(), launchesBefore) << "braid launched kernels for one rank's calls";
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  cudaFree(send);
  cudaFree(recv);
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Engines, SingleRank, testing::Values("staged", "kernels"),
                         [](const testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

}  // namespace
