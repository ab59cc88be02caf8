// One rank's device calls are device copies on its stream (engine/device,
// copySingleRankCalls): the right bytes, in and out of place, on both engines,
// and no kernel of braid's (neither a stream-wait nor a plan kernel), so no
// round trip through pinned memory and the proxy. And ncclMemAlloc, which
// such one-rank runs (nccl-tests) take their buffers from, gives device memory.
// And a rank alone in its process makes no FIFO arena.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "fakecuda.h"

namespace {

class SingleRank : public testing::TestWithParam<const char*> {};

// A one-rank communicator on device 0 (with `engine`, or the default engine).
void initOneRank(const char* engine, ncclComm_t* comm) {
  if (engine != nullptr) setenv("BRAID_DEVICE_ENGINE", engine, 1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  int dev = 0;
  ASSERT_EQ(ncclCommInitAll(comm, 1, &dev), ncclSuccess) << ncclGetLastError(nullptr);
  unsetenv("BRAID_DEVICE_ENGINE");
}

TEST_P(SingleRank, CollectivesAreCopiesWithoutKernels) {
  ncclComm_t comm = nullptr;
  ASSERT_NO_FATAL_FAILURE(initOneRank(GetParam(), &comm));
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

// Sends to itself pair with its receives in issue order, each pair a copy
// (nccl-tests' alltoall and sendrecv on one GPU).
TEST_P(SingleRank, SelfSendsAndReceivesAreCopiesWithoutKernels) {
  ncclComm_t comm = nullptr;
  ASSERT_NO_FATAL_FAILURE(initOneRank(GetParam(), &comm));
  constexpr size_t kCount = 3001;
  std::vector<int32_t> a(kCount), b(kCount);
  for (size_t i = 0; i < kCount; ++i) a[i] = int32_t(i * 7 + 1), b[i] = -int32_t(i);
  int32_t *sendA = nullptr, *sendB = nullptr, *recvA = nullptr, *recvB = nullptr;
  for (int32_t** p : {&sendA, &sendB, &recvA, &recvB})
    ASSERT_EQ(cudaMalloc(p, kCount * sizeof(int32_t)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(sendA, a.data(), kCount * sizeof(int32_t), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(sendB, b.data(), kCount * sizeof(int32_t), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  const uint64_t launchesBefore = fakecuda::launchesTracked();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclRecv(recvA, kCount, ncclInt32, 0, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclSend(sendA, kCount, ncclInt32, 0, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclSend(sendB, kCount, ncclInt32, 0, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclRecv(recvB, kCount, ncclInt32, 0, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  std::vector<int32_t> got(kCount);
  ASSERT_EQ(cudaMemcpy(got.data(), recvA, kCount * sizeof(int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, a) << "the first receive takes the first send";
  ASSERT_EQ(cudaMemcpy(got.data(), recvB, kCount * sizeof(int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, b);
  EXPECT_EQ(fakecuda::launchesTracked(), launchesBefore) << "braid launched kernels for one rank's sends";
  ncclCommDestroy(comm);
  for (int32_t* p : {sendA, sendB, recvA, recvB}) cudaFree(p);
}

// nccl-tests takes its buffers from ncclMemAlloc and fills them with
// cudaMemset: the memory must be the current device's, and ncclMemFree must
// give it back to CUDA.
TEST(MemAlloc, GivesDeviceMemoryThatCollectivesAndCudaCallsTake) {
  ncclComm_t comm = nullptr;
  ASSERT_NO_FATAL_FAILURE(initOneRank(nullptr, &comm));
  constexpr size_t kCount = 1000;
  float *send = nullptr, *recv = nullptr;
  ASSERT_EQ(ncclMemAlloc(reinterpret_cast<void**>(&send), kCount * sizeof(float)), ncclSuccess);
  ASSERT_EQ(ncclMemAlloc(reinterpret_cast<void**>(&recv), kCount * sizeof(float)), ncclSuccess);
  for (float* p : {send, recv}) {
    cudaPointerAttributes attr{};
    ASSERT_EQ(cudaPointerGetAttributes(&attr, p), cudaSuccess);
    EXPECT_EQ(attr.type, cudaMemoryTypeDevice) << "ncclMemAlloc gave host memory";
    EXPECT_EQ(attr.device, 0);
    ASSERT_EQ(cudaMemset(p, 0, kCount * sizeof(float)), cudaSuccess);
  }
  const std::vector<float> in(kCount, 2.5f);
  ASSERT_EQ(cudaMemcpy(send, in.data(), kCount * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  ASSERT_EQ(ncclAllReduce(send, recv, kCount, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  std::vector<float> got(kCount);
  ASSERT_EQ(cudaMemcpy(got.data(), recv, kCount * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, in);
  EXPECT_EQ(ncclMemFree(send), ncclSuccess);
  EXPECT_EQ(ncclMemFree(recv), ncclSuccess);
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, send) == cudaSuccess) {
    EXPECT_NE(attr.type, cudaMemoryTypeDevice) << "ncclMemFree left the device memory allocated";
  }
  cudaGetLastError();
  EXPECT_EQ(ncclMemFree(nullptr), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// The plan kernels' FIFO arena (BRAID_DEVICE_FIFO_ARENA, 128 MiB) holds
// FIFOs with ranks of the same process only: a rank alone in its process (one
// rank here; a process per GPU in a real job) makes none, two ranks of one
// process make one each.
TEST(FifoArena, OnlyCommunicatorsWithARankInTheirProcessMakeOne) {
  constexpr uint64_t kArena = uint64_t(128) << 20;
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  uint64_t before = fakecuda::deviceBytesInUse();
  ncclComm_t alone = nullptr;
  ASSERT_NO_FATAL_FAILURE(initOneRank("kernels", &alone));
  EXPECT_LT(fakecuda::deviceBytesInUse() - before, kArena / 4) << "a rank alone in its process made an arena";
  EXPECT_EQ(ncclCommDestroy(alone), ncclSuccess);

  before = fakecuda::deviceBytesInUse();
  ncclComm_t pair[2] = {};
  int devs[2] = {0, 0};
  setenv("BRAID_DEVICE_ENGINE", "kernels", 1);
  ASSERT_EQ(ncclCommInitAll(pair, 2, devs), ncclSuccess) << ncclGetLastError(nullptr);
  unsetenv("BRAID_DEVICE_ENGINE");
  EXPECT_GE(fakecuda::deviceBytesInUse() - before, 2 * kArena) << "two ranks of one process made no arenas";
  for (ncclComm_t c : pair) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

INSTANTIATE_TEST_SUITE_P(Engines, SingleRank, testing::Values("staged", "kernels"),
                         [](const testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

}  // namespace
