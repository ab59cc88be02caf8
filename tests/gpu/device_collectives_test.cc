// Collectives on device buffers (the staged device path, src/runtime/device)
// with ranks as threads of one process on one GPU: ncclCommInitAll, one stream
// per rank, every call issued for all ranks inside one ncclGroupStart/End.
// Also: stream semantics, errors of the host work, abort, graph capture and
// the validation of buffer kinds. Skips without a GPU (fails under
// BRAID_REQUIRE_GPU, as tests/gpu/run.sh runs it).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "braid.h"
#include "device_cases.h"
#include "gpu_env.h"
#include "test_kernels.h"

namespace {

#define CUDA_ASSERT(call) ASSERT_EQ((call), cudaSuccess) << #call
#define NCCL_ASSERT(call) ASSERT_EQ((call), ncclSuccess) << #call << ": " << ncclGetLastError(nullptr)

// Ranks 0..n-1 of one communicator on device 0, each with a non-blocking stream.
class Ranks {
 public:
  explicit Ranks(int n) : comms_(n), streams_(n) {}
  ~Ranks() {
    for (ncclComm_t c : comms_)
      if (c) ncclCommDestroy(c);
    for (cudaStream_t s : streams_)
      if (s) cudaStreamDestroy(s);
  }
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  ncclResult_t init() {
    if (cudaSetDevice(0) != cudaSuccess) return ncclUnhandledCudaError;
    for (auto& s : streams_)
      if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) return ncclUnhandledCudaError;
    std::vector<int> devs(comms_.size(), 0);
    return ncclCommInitAll(comms_.data(), static_cast<int>(comms_.size()), devs.data());
  }
  int size() const { return static_cast<int>(comms_.size()); }
  ncclComm_t comm(int r) const { return comms_[r]; }
  cudaStream_t stream(int r) const { return streams_[r]; }
  // Leaves destruction of rank r's communicator to the test (it aborted it).
  void forget(int r) { comms_[r] = nullptr; }
  std::vector<devcase::LocalRank> local() const {
    std::vector<devcase::LocalRank> out;
    for (int r = 0; r < size(); ++r) out.push_back({comms_[r], r, streams_[r]});
    return out;
  }

 private:
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
};

class DeviceCollectives : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonHere()); }
};

// Every collective x datatype x op, in and out of place.
TEST_P(DeviceCollectives, MatchTheHostReference) {
  const int n = GetParam();
  Ranks ranks(n);
  NCCL_ASSERT(ranks.init());
  ASSERT_EQ(braidSupportsDeviceBuffers(), 1);
  devcase::Runner runner(ranks.local(), n, [](const std::string& m) { ADD_FAILURE() << m; });
  for (const devcase::Case& c : devcase::allCases(n, 1031)) {
    ASSERT_TRUE(runner.run(c)) << devcase::describe(c);
    ASSERT_LT(runner.failures(), 20u) << "stopping after 20 failures";
  }
}

// Several FIFO slots per call, and the staging pool's larger blocks.
TEST_P(DeviceCollectives, LargeCalls) {
  const int n = GetParam();
  Ranks ranks(n);
  NCCL_ASSERT(ranks.init());
  devcase::Runner runner(ranks.local(), n, [](const std::string& m) { ADD_FAILURE() << m; });
  const size_t count = (size_t(1) << 20) + 3;
  for (auto coll : {devcase::Coll::kAllReduce, devcase::Coll::kAllGather, devcase::Coll::kReduceScatter}) {
    for (bool inPlace : {false, true}) {
      devcase::Case c;
      c.coll = coll;
      c.type = ncclFloat32;
      c.count = count;
      c.inPlace = inPlace;
      ASSERT_TRUE(runner.run(c)) << devcase::describe(c);
    }
  }
}

// Calls queued without synchronising run in issue order: each in-place
// allreduce consumes the result of the previous one.
TEST_P(DeviceCollectives, QueuedCallsRunInIssueOrder) {
  const int n = GetParam();
  Ranks ranks(n);
  NCCL_ASSERT(ranks.init());
  const size_t count = 4099;
  const int calls = 6;
  std::vector<int32_t*> bufs(n);
  for (int r = 0; r < n; ++r) {
    CUDA_ASSERT(cudaMalloc(&bufs[r], count * sizeof(int32_t)));
    std::vector<int32_t> init(count, r + 1);
    CUDA_ASSERT(cudaMemcpy(bufs[r], init.data(), count * sizeof(int32_t), cudaMemcpyHostToDevice));
  }
  for (int k = 0; k < calls; ++k) {
    NCCL_ASSERT(ncclGroupStart());
    for (int r = 0; r < n; ++r)
      NCCL_ASSERT(ncclAllReduce(bufs[r], bufs[r], count, ncclInt32, ncclSum, ranks.comm(r), ranks.stream(r)));
    NCCL_ASSERT(ncclGroupEnd());
  }
  int64_t want = int64_t(n) * (n + 1) / 2;
  for (int k = 1; k < calls; ++k) want *= n;
  for (int r = 0; r < n; ++r) {
    CUDA_ASSERT(cudaStreamSynchronize(ranks.stream(r)));
    std::vector<int32_t> got(count);
    CUDA_ASSERT(cudaMemcpy(got.data(), bufs[r], count * sizeof(int32_t), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(got[i], want) << "rank " << r << " element " << i;
    cudaFree(bufs[r]);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceCollectives, ::testing::Values(1, 2, 4, 8),
                         [](const ::testing::TestParamInfo<int>& p) { return std::to_string(p.param) + "ranks"; });

class DevicePath : public ::testing::Test {
 protected:
  void SetUp() override { GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonHere()); }
};

// Mapped host memory shared with a kernel.
struct MappedInts {
  int* host = nullptr;
  int* dev = nullptr;
  ~MappedInts() {
    if (host) cudaFreeHost(host);
  }
  bool alloc(size_t n) {
    if (cudaHostAlloc(reinterpret_cast<void**>(&host), n * sizeof(int), cudaHostAllocMapped) != cudaSuccess) return false;
    std::memset(host, 0, n * sizeof(int));
    return cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev), host, 0) == cudaSuccess;
  }
};

// The calls return before the stream reaches them (a kernel ahead of them waits
// for the host to open a gate, which it does only after the calls returned),
// and their copies follow the kernel's writes in stream order.
TEST_F(DevicePath, CallsReturnAtOnceAndFollowStreamOrder) {
  const int n = 2;
  const size_t count = 70000;
  Ranks ranks(n);
  NCCL_ASSERT(ranks.init());
  MappedInts words;  // [0] gate, [1] timed out
  ASSERT_TRUE(words.alloc(2));
  std::vector<int32_t*> send(n), recv(n);
  for (int r = 0; r < n; ++r) {
    CUDA_ASSERT(cudaMalloc(&send[r], count * sizeof(int32_t)));
    CUDA_ASSERT(cudaMalloc(&recv[r], count * sizeof(int32_t)));
    CUDA_ASSERT(cudaMemset(send[r], 0, count * sizeof(int32_t)));
    CUDA_ASSERT(cudaMemset(recv[r], 0, count * sizeof(int32_t)));
  }
  CUDA_ASSERT(cudaDeviceSynchronize());
  for (int r = 0; r < n; ++r)
    CUDA_ASSERT(gputest::launchGateThenFill(words.dev, send[r], count, r + 1, words.dev + 1,
                                            uint64_t(60) * 1000000000ull, ranks.stream(r)));
  NCCL_ASSERT(ncclGroupStart());
  for (int r = 0; r < n; ++r)
    NCCL_ASSERT(ncclAllReduce(send[r], recv[r], count, ncclInt32, ncclSum, ranks.comm(r), ranks.stream(r)));
  NCCL_ASSERT(ncclGroupEnd());
  // Only now may the kernels write the inputs.
  __atomic_store_n(words.host, 1, __ATOMIC_SEQ_CST);
  for (int r = 0; r < n; ++r) CUDA_ASSERT(cudaStreamSynchronize(ranks.stream(r)));
  EXPECT_EQ(words.host[1], 0) << "the gate kernel gave up: a collective call did not return before its stream ran";
  for (int r = 0; r < n; ++r) {
    std::vector<int32_t> got(count);
    CUDA_ASSERT(cudaMemcpy(got.data(), recv[r], count * sizeof(int32_t), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(got[i], 3) << "rank " << r << " element " << i;
    cudaFree(send[r]);
    cudaFree(recv[r]);
  }
}

// Waits for a stream with a generous bound, so a hang fails instead of blocking ctest.
bool streamFinishes(cudaStream_t s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < until) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// A peer that never joins: ncclCommAbort releases the waiting stream.
TEST_F(DevicePath, AbortReleasesAStreamWhosePeerNeverJoins) {
  Ranks ranks(2);
  NCCL_ASSERT(ranks.init());
  const size_t count = 1024;
  float* buf[2];
  for (int r = 0; r < 2; ++r) {
    CUDA_ASSERT(cudaMalloc(&buf[r], count * sizeof(float)));
    CUDA_ASSERT(cudaMemset(buf[r], 0, count * sizeof(float)));
  }
  // Connected first, so that rank 0 then waits in the data path.
  NCCL_ASSERT(ncclGroupStart());
  for (int r = 0; r < 2; ++r)
    NCCL_ASSERT(ncclAllReduce(buf[r], buf[r], count, ncclFloat32, ncclSum, ranks.comm(r), ranks.stream(r)));
  NCCL_ASSERT(ncclGroupEnd());
  for (int r = 0; r < 2; ++r) CUDA_ASSERT(cudaStreamSynchronize(ranks.stream(r)));

  NCCL_ASSERT(ncclAllReduce(buf[0], buf[0], count, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0)));
  EXPECT_EQ(cudaStreamQuery(ranks.stream(0)), cudaErrorNotReady) << "rank 0's call completed without its peer";
  NCCL_ASSERT(ncclCommAbort(ranks.comm(0)));
  ranks.forget(0);
  EXPECT_TRUE(streamFinishes(ranks.stream(0))) << "the stream of the aborted communicator still waits";
  NCCL_ASSERT(ncclCommAbort(ranks.comm(1)));
  ranks.forget(1);
  for (int r = 0; r < 2; ++r) cudaFree(buf[r]);
}

// A failure of the host work (here: the peer never joins, the timeout expires)
// releases the stream and reaches ncclCommGetAsyncError.
TEST_F(DevicePath, HostWorkFailureReleasesTheStreamAndSetsTheAsyncError) {
  Ranks ranks(2);
  NCCL_ASSERT(ranks.init());
  const size_t count = 1024;
  float* bufs[2];
  for (int r = 0; r < 2; ++r) {
    CUDA_ASSERT(cudaMalloc(&bufs[r], count * sizeof(float)));
    CUDA_ASSERT(cudaMemset(bufs[r], 0, count * sizeof(float)));
  }
  // Connected first, so that rank 0 then times out in the data path.
  NCCL_ASSERT(ncclGroupStart());
  for (int r = 0; r < 2; ++r)
    NCCL_ASSERT(ncclAllReduce(bufs[r], bufs[r], count, ncclFloat32, ncclSum, ranks.comm(r), ranks.stream(r)));
  NCCL_ASSERT(ncclGroupEnd());
  for (int r = 0; r < 2; ++r) CUDA_ASSERT(cudaStreamSynchronize(ranks.stream(r)));
  float* buf = bufs[0];
  NCCL_ASSERT(braidCommSetTimeout(ranks.comm(0), 1.0));
  NCCL_ASSERT(ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0)));
  EXPECT_TRUE(streamFinishes(ranks.stream(0))) << "a failed device call left its stream waiting";
  ncclResult_t async = ncclSuccess;
  NCCL_ASSERT(ncclCommGetAsyncError(ranks.comm(0), &async));
  EXPECT_NE(async, ncclSuccess);
  EXPECT_NE(async, ncclInProgress);
  NCCL_ASSERT(ncclCommAbort(ranks.comm(0)));
  ranks.forget(0);
  NCCL_ASSERT(ncclCommAbort(ranks.comm(1)));
  ranks.forget(1);
  for (float* b : bufs) cudaFree(b);
}

TEST_F(DevicePath, GraphCaptureIsRefusedWithADocumentedError) {
  Ranks ranks(1);
  NCCL_ASSERT(ranks.init());
  float* buf = nullptr;
  CUDA_ASSERT(cudaMalloc(&buf, 256 * sizeof(float)));
  CUDA_ASSERT(cudaStreamBeginCapture(ranks.stream(0), cudaStreamCaptureModeRelaxed));
  const ncclResult_t r = ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0));
  const std::string message = ncclGetLastError(nullptr);
  cudaGraph_t graph = nullptr;
  CUDA_ASSERT(cudaStreamEndCapture(ranks.stream(0), &graph));
  if (graph) cudaGraphDestroy(graph);
  EXPECT_EQ(r, ncclInvalidUsage);
  EXPECT_NE(message.find("graph capture"), std::string::npos) << message;
  // The communicator is still usable.
  NCCL_ASSERT(ncclAllReduce(buf, buf, 256, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0)));
  CUDA_ASSERT(cudaStreamSynchronize(ranks.stream(0)));
  cudaFree(buf);
}

TEST_F(DevicePath, DeviceSendWithHostReceiveIsInvalid) {
  Ranks ranks(1);
  NCCL_ASSERT(ranks.init());
  float* dev = nullptr;
  CUDA_ASSERT(cudaMalloc(&dev, 256 * sizeof(float)));
  std::vector<float> host(256);
  EXPECT_EQ(ncclAllReduce(dev, host.data(), 256, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0)),
            ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("device"), std::string::npos);
  EXPECT_EQ(ncclAllReduce(host.data(), dev, 256, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0)),
            ncclInvalidArgument);
  // A group of a device call and a host call.
  NCCL_ASSERT(ncclGroupStart());
  NCCL_ASSERT(ncclAllReduce(dev, dev, 256, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0)));
  NCCL_ASSERT(ncclAllReduce(host.data(), host.data(), 256, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0)));
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  // Host buffers still take the host path on the same communicator, after device calls.
  NCCL_ASSERT(ncclAllReduce(dev, dev, 256, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0)));
  for (float& x : host) x = 2.5f;
  NCCL_ASSERT(ncclAllReduce(host.data(), host.data(), 256, ncclFloat32, ncclSum, ranks.comm(0), ranks.stream(0)));
  EXPECT_EQ(host[7], 2.5f);
  CUDA_ASSERT(cudaStreamSynchronize(ranks.stream(0)));
  cudaFree(dev);
}

// A PreMulSum scalar in device memory is read when the call runs on its stream
// (covered with device buffers by MatchTheHostReference); with host buffers,
// which run at once on the CPU, it is refused instead of dereferenced.
TEST_F(DevicePath, DeviceScalarWithHostBuffersIsInvalid) {
  Ranks ranks(1);
  NCCL_ASSERT(ranks.init());
  float* scalar = nullptr;
  CUDA_ASSERT(cudaMalloc(&scalar, sizeof(float)));
  const float two = 2.0f;
  CUDA_ASSERT(cudaMemcpy(scalar, &two, sizeof two, cudaMemcpyHostToDevice));
  ncclRedOp_t op;
  NCCL_ASSERT(ncclRedOpCreatePreMulSum(&op, scalar, ncclFloat32, ncclScalarDevice, ranks.comm(0)));
  std::vector<float> host(64, 1.0f);
  EXPECT_EQ(ncclAllReduce(host.data(), host.data(), 64, ncclFloat32, op, ranks.comm(0), ranks.stream(0)),
            ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("scalar is in device memory"), std::string::npos)
      << ncclGetLastError(nullptr);
  NCCL_ASSERT(ncclRedOpDestroy(op, ranks.comm(0)));
  cudaFree(scalar);
}

}  // namespace
