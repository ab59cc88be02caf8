// The recorder's self-test: through braid's public API on the fake runtime,
// a synchronising call made while a plan kernel waits for a message that has
// not come is recorded (with the call and the outstanding kernel), and a
// clean run of both device engines records none.
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

#define CUDA_ASSERT(call) ASSERT_EQ((call), cudaSuccess) << #call
#define NCCL_ASSERT(call) ASSERT_EQ((call), ncclSuccess) << #call << ": " << ncclGetLastError(nullptr)

// Two thread ranks on device 0 with non-blocking streams, under one engine.
class Pair {
 public:
  explicit Pair(const char* engine) {
    setenv("BRAID_DEVICE_ENGINE", engine, 1);
    ok_ = cudaSetDevice(0) == cudaSuccess;
    for (auto& s : streams_) ok_ = ok_ && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess;
    int devs[2] = {0, 0};
    ok_ = ok_ && ncclCommInitAll(comms_, 2, devs) == ncclSuccess;
    for (auto& b : bufs_) ok_ = ok_ && cudaMalloc(&b, kCount * sizeof(float)) == cudaSuccess;
    unsetenv("BRAID_DEVICE_ENGINE");
  }
  ~Pair() {
    for (ncclComm_t c : comms_)
      if (c) ncclCommDestroy(c);
    for (float* b : bufs_) cudaFree(b);
    for (cudaStream_t s : streams_)
      if (s) cudaStreamDestroy(s);
  }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;

  bool ok() const { return ok_; }
  ncclResult_t allReduce(int rank) {
    return ncclAllReduce(bufs_[rank], bufs_[rank], kCount, ncclFloat32, ncclSum, comms_[rank], streams_[rank]);
  }
  ncclResult_t allReduceBoth() {
    ncclGroupStart();
    for (int r = 0; r < 2; ++r) allReduce(r);
    return ncclGroupEnd();
  }
  // Two allreduces of each rank in one group: their FIFOs are made, so that a
  // later call of one rank waits in the data path. (One call each would
  // address the other rank's buffer in place, PeerAccess, and make none.)
  ncclResult_t connectBoth() {
    ncclGroupStart();
    for (int r = 0; r < 2; ++r)
      for (int twice = 0; twice < 2; ++twice) allReduce(r);
    return ncclGroupEnd();
  }
  void fill(int rank, float v) {
    std::vector<float> host(kCount, v);
    cudaMemcpy(bufs_[rank], host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice);
  }
  float first(int rank) {
    float v = 0;
    cudaMemcpy(&v, bufs_[rank], sizeof v, cudaMemcpyDeviceToHost);
    return v;
  }
  cudaStream_t stream(int r) const { return streams_[r]; }
  // The test aborted rank r itself.
  void abort(int r) {
    ncclCommAbort(comms_[r]);
    comms_[r] = nullptr;
  }

  static constexpr size_t kCount = 4096;

 private:
  bool ok_ = false;
  ncclComm_t comms_[2] = {};
  cudaStream_t streams_[2] = {};
  float* bufs_[2] = {};
};

bool finishes(cudaStream_t s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < until) {
    if (cudaStreamQuery(s) == cudaSuccess) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

TEST(FakeCudaRecorder, CatchesAMallocWhileAPlanKernelWaitsForItsPeer) {
  Pair pair("kernels");
  ASSERT_TRUE(pair.ok());
  NCCL_ASSERT(pair.connectBoth());  // FIFOs made: the next call waits in the data path
  for (int r = 0; r < 2; ++r) CUDA_ASSERT(cudaStreamSynchronize(pair.stream(r)));
  const size_t before = fakecuda::violationCount();

  NCCL_ASSERT(pair.allReduce(0));  // rank 1 never joins: rank 0's lanes wait
  EXPECT_EQ(cudaStreamQuery(pair.stream(0)), cudaErrorNotReady);
  void* p = nullptr;
  {
    fakecuda::ExpectViolations expect;
    CUDA_ASSERT(cudaMalloc(&p, 64));
  }
  const std::vector<fakecuda::Violation> seen = fakecuda::violations();
  ASSERT_EQ(seen.size(), before + 1);
  const fakecuda::Violation& v = seen.back();
  EXPECT_EQ(v.call, "cudaMalloc");
  EXPECT_NE(v.caller.find("application"), std::string::npos) << v.caller;
  EXPECT_NE(v.outstanding.find("plan kernel"), std::string::npos) << v.outstanding;
  EXPECT_TRUE(v.expected);

  pair.abort(0);  // the abort word ends the waiting lanes
  EXPECT_TRUE(finishes(pair.stream(0)));
  pair.abort(1);
  EXPECT_EQ(fakecuda::violationCount(), before + 1) << "after the kernel ended, nothing more is recorded";
  CUDA_ASSERT(cudaFree(p));
  EXPECT_EQ(fakecuda::violationCount(), before + 1);
}

TEST(FakeCudaRecorder, CatchesAHostAllocWhileAStreamWaitKernelWaits) {
  Pair pair("staged");
  ASSERT_TRUE(pair.ok());
  NCCL_ASSERT(pair.allReduceBoth());
  for (int r = 0; r < 2; ++r) CUDA_ASSERT(cudaStreamSynchronize(pair.stream(r)));
  const size_t before = fakecuda::violationCount();
  NCCL_ASSERT(pair.allReduce(0));  // the stream-wait kernel holds rank 0's stream
  {
    fakecuda::ExpectViolations expect;
    void* p = nullptr;
    CUDA_ASSERT(cudaHostAlloc(&p, 64, cudaHostAllocDefault));
    ASSERT_EQ(fakecuda::violationCount(), before + 1);
    EXPECT_EQ(fakecuda::violations().back().call, "cudaHostAlloc");
    EXPECT_NE(fakecuda::violations().back().outstanding.find("stream-wait kernel"), std::string::npos);
    NCCL_ASSERT(pair.allReduce(1));  // the peer joins: the kernel ends
    EXPECT_TRUE(finishes(pair.stream(0)));
    EXPECT_TRUE(finishes(pair.stream(1)));
    CUDA_ASSERT(cudaFreeHost(p));
  }
  EXPECT_EQ(fakecuda::violationCount(), before + 1);
}

class FakeCudaCleanRun : public ::testing::TestWithParam<const char*> {};

TEST_P(FakeCudaCleanRun, RecordsNoViolationAndTheRightSum) {
  const size_t before = fakecuda::violationCount();
  {
    Pair pair(GetParam());
    ASSERT_TRUE(pair.ok());
    for (int k = 0; k < 3; ++k) {
      pair.fill(0, 1.0f);
      pair.fill(1, 2.0f);
      NCCL_ASSERT(pair.allReduceBoth());
      for (int r = 0; r < 2; ++r) CUDA_ASSERT(cudaStreamSynchronize(pair.stream(r)));
      EXPECT_EQ(pair.first(0), 3.0f);
      EXPECT_EQ(pair.first(1), 3.0f);
    }
  }
  EXPECT_EQ(fakecuda::violationCount(), before);
}

INSTANTIATE_TEST_SUITE_P(Engines, FakeCudaCleanRun, ::testing::Values("staged", "kernels"));

}  // namespace
