// Collectives on device buffers (the staged device path, src/engine/device)
// with ranks as threads of one process on one GPU: ncclCommInitAll, one stream
// per rank, every call issued for all ranks inside one ncclGroupStart/End.
// Also: stream semantics, errors of the host work, abort, CUDA graph capture
// (launched again and again, mixed with calls outside graphs, aborted) and the
// validation of buffer kinds and of captures. Skips without a GPU (fails under
// BRAID_REQUIRE_GPU, as tests/gpu/run.sh runs it).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <functional>
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
  // The pageable copies' DMA, before the ranks' non-blocking streams read.
  CUDA_ASSERT(cudaStreamSynchronize(nullptr));
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

// Two ranks connected by in-place allreduces of `count` floats in buf[r], so
// that a later call waits in the data path, not in connection set-up. Two
// calls a rank in the group: one each from a group holding both ranks would
// address each other's buffers in place (PeerAccess, under plan kernels) and
// connect no FIFO.
void connectedPair(const Ranks& ranks, size_t count, float* buf[2]) {
  for (int r = 0; r < 2; ++r) {
    CUDA_ASSERT(cudaMalloc(&buf[r], count * sizeof(float)));
    CUDA_ASSERT(cudaMemset(buf[r], 0, count * sizeof(float)));
  }
  NCCL_ASSERT(ncclGroupStart());
  for (int r = 0; r < 2; ++r)
    for (int twice = 0; twice < 2; ++twice)
      NCCL_ASSERT(ncclAllReduce(buf[r], buf[r], count, ncclFloat32, ncclSum, ranks.comm(r), ranks.stream(r)));
  NCCL_ASSERT(ncclGroupEnd());
  for (int r = 0; r < 2; ++r) CUDA_ASSERT(cudaStreamSynchronize(ranks.stream(r)));
}

// A peer that never joins: ncclCommAbort releases the waiting stream.
TEST_F(DevicePath, AbortReleasesAStreamWhosePeerNeverJoins) {
  Ranks ranks(2);
  NCCL_ASSERT(ranks.init());
  const size_t count = 1024;
  float* buf[2] = {};
  ASSERT_NO_FATAL_FAILURE(connectedPair(ranks, count, buf));

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
  float* bufs[2] = {};
  ASSERT_NO_FATAL_FAILURE(connectedPair(ranks, count, bufs));
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

// ---- CUDA graphs -----------------------------------------------------------------

// One graph over every rank's stream (forked from rank 0's stream and joined
// back), or one graph per rank, each launched on its rank's stream(s).
enum class GraphShape { kOneForAllRanks, kOnePerRank };

class RankGraphs {
 public:
  RankGraphs(const Ranks& ranks, GraphShape shape, cudaStreamCaptureMode mode)
      : ranks_(ranks), shape_(shape), mode_(mode) {}
  ~RankGraphs() { destroy(); }
  RankGraphs(const RankGraphs&) = delete;
  RankGraphs& operator=(const RankGraphs&) = delete;

  // Events first: no CUDA call that is not stream work is made while capturing.
  cudaError_t begin() {
    for (int r = 0; r < ranks_.size(); ++r) {
      cudaEvent_t e = nullptr;
      const cudaError_t err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
      if (err != cudaSuccess) return err;
      events_.push_back(e);
    }
    if (shape_ == GraphShape::kOnePerRank) {
      for (int r = 0; r < ranks_.size(); ++r) {
        const cudaError_t err = cudaStreamBeginCapture(ranks_.stream(r), mode_);
        if (err != cudaSuccess) return err;
      }
      return cudaSuccess;
    }
    cudaError_t err = cudaStreamBeginCapture(ranks_.stream(0), mode_);
    if (err == cudaSuccess) err = cudaEventRecord(events_[0], ranks_.stream(0));
    for (int r = 1; err == cudaSuccess && r < ranks_.size(); ++r)
      err = cudaStreamWaitEvent(ranks_.stream(r), events_[0], 0);
    return err;
  }

  // Ends every capture (also after a failed call) and instantiates the graphs.
  cudaError_t end() {
    cudaError_t first = cudaSuccess;
    auto note = [&first](cudaError_t e) {
      if (first == cudaSuccess) first = e;
    };
    if (shape_ == GraphShape::kOnePerRank) {
      for (int r = 0; r < ranks_.size(); ++r) {
        cudaGraph_t g = nullptr;
        note(cudaStreamEndCapture(ranks_.stream(r), &g));
        graphs_.push_back(g);
      }
    } else {
      for (int r = 1; r < ranks_.size(); ++r) {
        note(cudaEventRecord(events_[r], ranks_.stream(r)));
        note(cudaStreamWaitEvent(ranks_.stream(0), events_[r], 0));
      }
      cudaGraph_t g = nullptr;
      note(cudaStreamEndCapture(ranks_.stream(0), &g));
      graphs_.push_back(g);
    }
    for (cudaGraph_t g : graphs_) {
      cudaGraphExec_t e = nullptr;
      if (g != nullptr) note(cudaGraphInstantiateWithFlags(&e, g, 0));
      execs_.push_back(e);
    }
    return first;
  }

  // The graph of rank r (kOnePerRank), or the one graph (rank 0's stream).
  cudaError_t launch(int r) {
    const int g = shape_ == GraphShape::kOnePerRank ? r : 0;
    return cudaGraphLaunch(execs_[g], ranks_.stream(g));
  }
  cudaError_t launchAll() {
    const int n = shape_ == GraphShape::kOnePerRank ? ranks_.size() : 1;
    for (int r = 0; r < n; ++r) {
      const cudaError_t err = launch(r);
      if (err != cudaSuccess) return err;
    }
    return cudaSuccess;
  }

  void destroy() {
    for (cudaGraphExec_t e : execs_)
      if (e) cudaGraphExecDestroy(e);
    for (cudaGraph_t g : graphs_)
      if (g) cudaGraphDestroy(g);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    execs_.clear();
    graphs_.clear();
    events_.clear();
  }

 private:
  const Ranks& ranks_;
  GraphShape shape_;
  cudaStreamCaptureMode mode_;
  std::vector<cudaEvent_t> events_;  // [0] fork, [r] rank r joins
  std::vector<cudaGraph_t> graphs_;
  std::vector<cudaGraphExec_t> execs_;
};

// One call per rank, captured once and launched with new inputs each time.
// Values are small integers in float32: every sum is exact in any order.
struct GraphCase {
  std::string name;
  size_t sendCount = 0, recvCount = 0;  // elements per rank
  bool inPlace = false;                 // recv is the send buffer (sendCount == recvCount)
  bool deviceScalar = false;            // PreMulSum by the launch's scalar, in device memory
  std::function<float(int rank, int launch, size_t i)> input;
  std::function<float(int rank, int launch, size_t i)> expected;
  // Enqueues rank r's call(s) inside the group.
  std::function<ncclResult_t(int rank, const float* send, float* recv, ncclRedOp_t op, ncclComm_t comm,
                             cudaStream_t stream)>
      call;
};

float launchScalar(int launch) { return static_cast<float>(launch + 2); }

std::vector<GraphCase> graphCases(int n) {
  const size_t count = 1027;
  std::vector<GraphCase> cases;
  auto arInput = [](int r, int k, size_t i) { return static_cast<float>((r + 1) * (k + 1) + int(i % 13)); };
  auto arSum = [n, arInput](int, int k, size_t i) {
    float s = 0;
    for (int q = 0; q < n; ++q) s += arInput(q, k, i);
    return s;
  };
  for (bool inPlace : {false, true}) {
    GraphCase c;
    c.name = inPlace ? "allreduce in place" : "allreduce";
    c.sendCount = c.recvCount = count;
    c.inPlace = inPlace;
    c.input = arInput;
    c.expected = arSum;
    c.call = [count](int, const float* send, float* recv, ncclRedOp_t op, ncclComm_t comm, cudaStream_t s) {
      return ncclAllReduce(send, recv, count, ncclFloat32, op, comm, s);
    };
    cases.push_back(c);
  }
  {
    GraphCase c;
    c.name = "allreduce premulsum(scalar in device memory)";
    c.sendCount = c.recvCount = count;
    c.deviceScalar = true;
    c.input = arInput;
    c.expected = [arSum](int r, int k, size_t i) { return launchScalar(k) * arSum(r, k, i); };
    c.call = cases.front().call;
    cases.push_back(c);
  }
  {
    GraphCase c;
    c.name = "reducescatter";
    c.sendCount = count * n;
    c.recvCount = count;
    c.input = [](int r, int k, size_t j) { return static_cast<float>(r + 2 * k + int(j % 11)); };
    c.expected = [n, count, in = c.input](int r, int k, size_t i) {
      float s = 0;
      for (int q = 0; q < n; ++q) s += in(q, k, r * count + i);
      return s;
    };
    c.call = [count](int, const float* send, float* recv, ncclRedOp_t op, ncclComm_t comm, cudaStream_t s) {
      return ncclReduceScatter(send, recv, count, ncclFloat32, op, comm, s);
    };
    cases.push_back(c);
  }
  {
    GraphCase c;  // each rank sends to the next and receives from the previous: a pair for 2 ranks
    c.name = "send/recv";
    c.sendCount = c.recvCount = count;
    c.input = [](int r, int k, size_t i) { return static_cast<float>(r * 1000 + k * 100 + int(i % 97)); };
    c.expected = [n, in = c.input](int r, int k, size_t i) { return in((r + n - 1) % n, k, i); };
    c.call = [n, count](int r, const float* send, float* recv, ncclRedOp_t, ncclComm_t comm, cudaStream_t s) {
      const ncclResult_t a = ncclSend(send, count, ncclFloat32, (r + 1) % n, comm, s);
      if (a != ncclSuccess) return a;
      return ncclRecv(recv, count, ncclFloat32, (r + n - 1) % n, comm, s);
    };
    cases.push_back(c);
  }
  return cases;
}

// Device buffers of one rank for a graph case.
struct GraphBuffers {
  float* send = nullptr;
  float* recv = nullptr;
  float* scalar = nullptr;
  ncclRedOp_t op = ncclSum;
  bool createdOp = false;
  ncclComm_t comm = nullptr;
  ~GraphBuffers() {
    if (createdOp) ncclRedOpDestroy(op, comm);
    cudaFree(send);
    if (recv != send) cudaFree(recv);
    cudaFree(scalar);
  }
};

// Captures the case for every rank in one group, then launches the graphs
// `launches` times, writing new inputs (and scalar) before each launch and
// checking every result against the host reference.
void runGraphCase(const Ranks& ranks, GraphShape shape, cudaStreamCaptureMode mode, const GraphCase& c,
                  int launches) {
  SCOPED_TRACE(c.name);
  const int n = ranks.size();
  std::vector<GraphBuffers> bufs(n);
  for (int r = 0; r < n; ++r) {
    GraphBuffers& b = bufs[r];
    b.comm = ranks.comm(r);
    CUDA_ASSERT(cudaMalloc(&b.send, c.sendCount * sizeof(float)));
    b.recv = b.send;
    if (!c.inPlace) {
      CUDA_ASSERT(cudaMalloc(&b.recv, c.recvCount * sizeof(float)));
    }
    CUDA_ASSERT(cudaMalloc(&b.scalar, sizeof(float)));
    if (c.deviceScalar) {
      NCCL_ASSERT(ncclRedOpCreatePreMulSum(&b.op, b.scalar, ncclFloat32, ncclScalarDevice, b.comm));
      b.createdOp = true;
    }
  }
  CUDA_ASSERT(cudaDeviceSynchronize());

  RankGraphs graphs(ranks, shape, mode);
  CUDA_ASSERT(graphs.begin());
  ncclResult_t result = ncclGroupStart();
  for (int r = 0; result == ncclSuccess && r < n; ++r)
    result = c.call(r, bufs[r].send, bufs[r].recv, bufs[r].op, ranks.comm(r), ranks.stream(r));
  const ncclResult_t end = ncclGroupEnd();
  const std::string message = ncclGetLastError(nullptr);
  const cudaError_t ended = graphs.end();
  ASSERT_EQ(result, ncclSuccess) << message;
  ASSERT_EQ(end, ncclSuccess) << message;
  CUDA_ASSERT(ended);

  for (int k = 0; k < launches; ++k) {
    SCOPED_TRACE("launch " + std::to_string(k));
    for (int r = 0; r < n; ++r) {
      std::vector<float> in(c.sendCount), stale(c.recvCount, -1.0f);
      for (size_t i = 0; i < in.size(); ++i) in[i] = c.input(r, k, i);
      const float scalar = launchScalar(k);
      if (!c.inPlace) {
        CUDA_ASSERT(cudaMemcpy(bufs[r].recv, stale.data(), stale.size() * sizeof(float), cudaMemcpyHostToDevice));
      }
      CUDA_ASSERT(cudaMemcpy(bufs[r].send, in.data(), in.size() * sizeof(float), cudaMemcpyHostToDevice));
      CUDA_ASSERT(cudaMemcpy(bufs[r].scalar, &scalar, sizeof scalar, cudaMemcpyHostToDevice));
    }
    CUDA_ASSERT(cudaDeviceSynchronize());  // the copies are done before the graphs run
    CUDA_ASSERT(graphs.launchAll());
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(streamFinishes(ranks.stream(r))) << "rank " << r << "'s stream still waits";
      CUDA_ASSERT(cudaStreamSynchronize(ranks.stream(r)));
    }
    for (int r = 0; r < n; ++r) {
      std::vector<float> got(c.recvCount);
      CUDA_ASSERT(cudaMemcpy(got.data(), bufs[r].recv, got.size() * sizeof(float), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], c.expected(r, k, i)) << "rank " << r << " element " << i;
    }
    for (int r = 0; r < n; ++r) {
      ncclResult_t async = ncclInProgress;
      NCCL_ASSERT(ncclCommGetAsyncError(ranks.comm(r), &async));
      ASSERT_EQ(async, ncclSuccess) << "rank " << r;
    }
  }
  graphs.destroy();
}

// The graph suite: DeviceCollectives' skip-without-a-GPU set-up, its own name.
class DeviceGraphs : public DeviceCollectives {};

// One graph over all ranks, captured in the default (global) mode, in which
// braid's own allocations during the capture must not invalidate it.
TEST_P(DeviceGraphs, OneGraphForAllRanksRunsEveryLaunchOnItsInputs) {
  const int n = GetParam();
  Ranks ranks(n);
  NCCL_ASSERT(ranks.init());
  for (const GraphCase& c : graphCases(n))
    ASSERT_NO_FATAL_FAILURE(runGraphCase(ranks, GraphShape::kOneForAllRanks, cudaStreamCaptureModeGlobal, c, 3));
}

// One graph per rank, each captured in thread-local mode, launched one after
// the other from this thread.
TEST_P(DeviceGraphs, OneGraphPerRankRunsEveryLaunchOnItsInputs) {
  const int n = GetParam();
  Ranks ranks(n);
  NCCL_ASSERT(ranks.init());
  for (const GraphCase& c : graphCases(n))
    ASSERT_NO_FATAL_FAILURE(runGraphCase(ranks, GraphShape::kOnePerRank, cudaStreamCaptureModeThreadLocal, c, 3));
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceGraphs, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& p) { return std::to_string(p.param) + "ranks"; });

// Calls outside graphs mix with launches on the same streams, with no
// synchronisation between them. A kernel ahead on each stream holds the
// launches until the eager calls after them have been issued, so an eager call
// reaches the proxy before the launch that precedes it on its stream: it must
// wait for the launch (and see its result) instead of deadlocking behind it.
TEST_F(DevicePath, CallsOutsideGraphsMixWithGraphLaunches) {
  const int n = 2;
  const size_t count = 4099;
  Ranks ranks(n);
  NCCL_ASSERT(ranks.init());
  MappedInts words;  // [0] gate, [1] timed out
  ASSERT_TRUE(words.alloc(2));
  std::vector<int32_t*> x(n), y(n), z(n), w(n);
  for (int r = 0; r < n; ++r)
    for (int32_t** p : {&x[r], &y[r], &z[r], &w[r]}) {
      CUDA_ASSERT(cudaMalloc(p, count * sizeof(int32_t)));
      CUDA_ASSERT(cudaMemset(*p, 0, count * sizeof(int32_t)));
    }
  CUDA_ASSERT(cudaDeviceSynchronize());
  const int32_t sum = n * (n + 1) / 2;  // of the inputs r + 1
  auto eager = [&](const std::vector<int32_t*>& from, const std::vector<int32_t*>& to) {
    NCCL_ASSERT(ncclGroupStart());
    for (int r = 0; r < n; ++r)
      NCCL_ASSERT(ncclAllReduce(from[r], to[r], count, ncclInt32, ncclSum, ranks.comm(r), ranks.stream(r)));
    NCCL_ASSERT(ncclGroupEnd());
  };
  // Inputs x = factor * (r + 1), written by the gate kernels once the gate opens.
  auto closeGateThenFill = [&](int32_t factor) {
    __atomic_store_n(words.host, 0, __ATOMIC_SEQ_CST);
    for (int r = 0; r < n; ++r)
      CUDA_ASSERT(gputest::launchGateThenFill(words.dev, x[r], count, factor * (r + 1), words.dev + 1,
                                              uint64_t(60) * 1000000000ull, ranks.stream(r)));
  };
  auto openGate = [&]() { __atomic_store_n(words.host, 1, __ATOMIC_SEQ_CST); };
  auto expectAll = [&](const std::vector<int32_t*>& bufs, int32_t want, const char* what) {
    for (int r = 0; r < n; ++r) {
      ASSERT_TRUE(streamFinishes(ranks.stream(r))) << what << ": rank " << r << "'s stream still waits";
      std::vector<int32_t> got(count);
      CUDA_ASSERT(cudaMemcpy(got.data(), bufs[r], count * sizeof(int32_t), cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < count; ++i) ASSERT_EQ(got[i], want) << what << ", rank " << r << " element " << i;
    }
  };

  RankGraphs graphs(ranks, GraphShape::kOnePerRank, cudaStreamCaptureModeThreadLocal);
  CUDA_ASSERT(graphs.begin());
  ncclResult_t issued = ncclGroupStart();
  for (int r = 0; issued == ncclSuccess && r < n; ++r)
    issued = ncclAllReduce(x[r], y[r], count, ncclInt32, ncclSum, ranks.comm(r), ranks.stream(r));
  const ncclResult_t ended = ncclGroupEnd();
  CUDA_ASSERT(graphs.end());
  NCCL_ASSERT(issued);
  NCCL_ASSERT(ended);

  // A call outside graphs after the capture, before any launch.
  closeGateThenFill(1);
  eager(x, w);
  openGate();
  ASSERT_NO_FATAL_FAILURE(expectAll(w, sum, "eager call after the capture"));

  // A launch, then an eager call that reads the launch's result.
  closeGateThenFill(1);
  CUDA_ASSERT(graphs.launchAll());
  eager(y, z);
  openGate();
  ASSERT_NO_FATAL_FAILURE(expectAll(y, sum, "graph launch"));
  ASSERT_NO_FATAL_FAILURE(expectAll(z, n * sum, "eager call after a launch"));

  // New inputs; launch, eager, launch, eager, all queued before any runs.
  closeGateThenFill(2);
  CUDA_ASSERT(graphs.launchAll());
  eager(y, z);
  CUDA_ASSERT(graphs.launchAll());
  eager(y, w);
  openGate();
  ASSERT_NO_FATAL_FAILURE(expectAll(y, 2 * sum, "second and third launches"));
  ASSERT_NO_FATAL_FAILURE(expectAll(z, 2 * n * sum, "eager call between launches"));
  ASSERT_NO_FATAL_FAILURE(expectAll(w, 2 * n * sum, "eager call after the third launch"));
  EXPECT_EQ(words.host[1], 0) << "a gate kernel gave up: a call did not return before its stream ran";
  for (int r = 0; r < n; ++r) {
    ncclResult_t async = ncclInProgress;
    NCCL_ASSERT(ncclCommGetAsyncError(ranks.comm(r), &async));
    EXPECT_EQ(async, ncclSuccess) << "rank " << r;
  }
  graphs.destroy();
  for (int r = 0; r < n; ++r)
    for (int32_t* p : {x[r], y[r], z[r], w[r]}) cudaFree(p);
}

// connectedPair, then the same allreduce of each rank captured into `graphs`
// (one graph per rank).
void captureConnectedPair(const Ranks& ranks, size_t count, float* buf[2], RankGraphs& graphs) {
  connectedPair(ranks, count, buf);
  if (::testing::Test::HasFatalFailure()) return;
  CUDA_ASSERT(graphs.begin());
  ncclResult_t issued = ncclGroupStart();
  for (int r = 0; issued == ncclSuccess && r < 2; ++r)
    issued = ncclAllReduce(buf[r], buf[r], count, ncclFloat32, ncclSum, ranks.comm(r), ranks.stream(r));
  const ncclResult_t ended = ncclGroupEnd();
  CUDA_ASSERT(graphs.end());
  NCCL_ASSERT(issued);
  NCCL_ASSERT(ended);
}

// A launched graph whose peer never launches its own: ncclCommAbort releases
// the stream. The graphs outlive the communicators (their staging memory is
// then leaked, and destroying them later is safe).
TEST_F(DevicePath, AbortReleasesAGraphLaunchWhosePeerNeverLaunches) {
  Ranks ranks(2);
  NCCL_ASSERT(ranks.init());
  float* buf[2] = {};
  RankGraphs graphs(ranks, GraphShape::kOnePerRank, cudaStreamCaptureModeThreadLocal);
  ASSERT_NO_FATAL_FAILURE(captureConnectedPair(ranks, 1024, buf, graphs));

  CUDA_ASSERT(graphs.launch(0));
  EXPECT_EQ(cudaStreamQuery(ranks.stream(0)), cudaErrorNotReady) << "rank 0's launch completed without its peer";
  NCCL_ASSERT(ncclCommAbort(ranks.comm(0)));
  ranks.forget(0);
  EXPECT_TRUE(streamFinishes(ranks.stream(0))) << "the launch on the aborted communicator still waits";
  NCCL_ASSERT(ncclCommAbort(ranks.comm(1)));
  ranks.forget(1);
  graphs.destroy();
  for (int r = 0; r < 2; ++r) cudaFree(buf[r]);
}

// A launch whose host work fails (the peer never launches, the timeout
// expires) releases its stream and reaches ncclCommGetAsyncError; a later
// launch is skipped and passes too.
TEST_F(DevicePath, HostWorkFailureOfALaunchReleasesTheStreamAndSetsTheAsyncError) {
  Ranks ranks(2);
  NCCL_ASSERT(ranks.init());
  float* buf[2] = {};
  RankGraphs graphs(ranks, GraphShape::kOnePerRank, cudaStreamCaptureModeGlobal);
  ASSERT_NO_FATAL_FAILURE(captureConnectedPair(ranks, 1024, buf, graphs));

  NCCL_ASSERT(braidCommSetTimeout(ranks.comm(0), 1.0));
  CUDA_ASSERT(graphs.launch(0));
  EXPECT_TRUE(streamFinishes(ranks.stream(0))) << "a failed launch left its stream waiting";
  ncclResult_t async = ncclSuccess;
  NCCL_ASSERT(ncclCommGetAsyncError(ranks.comm(0), &async));
  EXPECT_NE(async, ncclSuccess);
  EXPECT_NE(async, ncclInProgress);
  CUDA_ASSERT(graphs.launch(0));
  EXPECT_TRUE(streamFinishes(ranks.stream(0))) << "a launch after a failure left its stream waiting";
  graphs.destroy();
  NCCL_ASSERT(ncclCommAbort(ranks.comm(0)));
  ranks.forget(0);
  NCCL_ASSERT(ncclCommAbort(ranks.comm(1)));
  ranks.forget(1);
  for (float* b : buf) cudaFree(b);
}

// A communicator's calls of one group are captured on one stream, or not at all.
TEST_F(DevicePath, CaptureOfACommunicatorOnTwoStreamsOrInPartIsInvalid) {
  Ranks ranks(1);
  NCCL_ASSERT(ranks.init());
  cudaStream_t other = nullptr;
  CUDA_ASSERT(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  cudaEvent_t fork = nullptr, join = nullptr;
  CUDA_ASSERT(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  CUDA_ASSERT(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  float* buf[2];
  for (float*& b : buf) CUDA_ASSERT(cudaMalloc(&b, 256 * sizeof(float)));
  const cudaStream_t mine = ranks.stream(0);
  auto group = [&]() {
    NCCL_ASSERT(ncclGroupStart());
    NCCL_ASSERT(ncclAllReduce(buf[0], buf[0], 256, ncclFloat32, ncclSum, ranks.comm(0), mine));
    NCCL_ASSERT(ncclAllReduce(buf[1], buf[1], 256, ncclFloat32, ncclSum, ranks.comm(0), other));
  };

  // Both streams in one capture.
  CUDA_ASSERT(cudaStreamBeginCapture(mine, cudaStreamCaptureModeGlobal));
  CUDA_ASSERT(cudaEventRecord(fork, mine));
  CUDA_ASSERT(cudaStreamWaitEvent(other, fork, 0));
  group();
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  std::string message = ncclGetLastError(nullptr);
  EXPECT_NE(message.find("on one stream"), std::string::npos) << message;
  CUDA_ASSERT(cudaEventRecord(join, other));
  CUDA_ASSERT(cudaStreamWaitEvent(mine, join, 0));
  cudaGraph_t graph = nullptr;
  CUDA_ASSERT(cudaStreamEndCapture(mine, &graph));
  if (graph) cudaGraphDestroy(graph);

  // One stream capturing, the other not.
  CUDA_ASSERT(cudaStreamBeginCapture(mine, cudaStreamCaptureModeThreadLocal));
  group();
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  message = ncclGetLastError(nullptr);
  EXPECT_NE(message.find("capture all of a communicator's calls"), std::string::npos) << message;
  graph = nullptr;
  CUDA_ASSERT(cudaStreamEndCapture(mine, &graph));
  if (graph) cudaGraphDestroy(graph);

  // The communicator is still usable.
  NCCL_ASSERT(ncclAllReduce(buf[0], buf[0], 256, ncclFloat32, ncclSum, ranks.comm(0), mine));
  CUDA_ASSERT(cudaStreamSynchronize(mine));
  ncclResult_t async = ncclInProgress;
  NCCL_ASSERT(ncclCommGetAsyncError(ranks.comm(0), &async));
  EXPECT_EQ(async, ncclSuccess);
  for (float* b : buf) cudaFree(b);
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
  cudaStreamDestroy(other);
}

}  // namespace
