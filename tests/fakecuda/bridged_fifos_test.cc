// Plan kernels of ranks on several hosts (BRAID_MULTIHOST_ENGINE=kernels): a
// FIFO with a rank on another host lives in mapped pinned memory on each end,
// and the communicator's bridge pump moves its messages over TCP while the
// kernel runs (engine/lanes/bridge_pump.h); FIFOs within a host stay in
// device memory. Each forked process is a host of its own (BRAID_HOSTID) with
// its own fake device, under the recorder. The calls run as plan kernels,
// not staged; a lost peer ends the others' kernels with an error naming it.
// tests/gpu builds the same file for a real GPU (BRAID_BRIDGED_FIFOS_ON_GPU:
// every process on the one GPU, no fake to count launches or CUDA calls).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "braid.h"
#include "common/log_dir.h"
#include "common/mp_harness.h"
#include "gpu_env.h"
#if !defined(BRAID_BRIDGED_FIFOS_ON_GPU)
#include "fakecuda.h"
#endif

namespace {

// A rank's value of element i: small integers, so every sum is exact.
float valueOf(int rank, size_t i) { return float(rank + 1 + int(i % 7)); }

float sumOf(int nranks, size_t i) {
  float s = 0;
  for (int r = 0; r < nranks; ++r) s += valueOf(r, i);
  return s;
}

// A rank's stream and buffers, for calls of up to kMaxCount floats per rank:
// made before any rank of the process calls braid, freed once all are done,
// as a program with thread ranks must. cudaMalloc and cudaFree wait for the
// whole device, and copies through pageable memory wait behind each other
// (tests/fakecuda/recorder.cc): between calls, either may wait for the other
// thread rank's kernel, which waits for this thread's next call (on an H200
// under CUDA_LAUNCH_BLOCKING=1, a cudaFree here hung the two-hosts test).
constexpr size_t kMaxCount = 300000;

struct RankBuffers {
  cudaStream_t stream = nullptr;
  float* in = nullptr;
  float* out = nullptr;
  float* pinned = nullptr;  // host side of every copy

  void make(int nranks) {
    const size_t bytes = kMaxCount * size_t(nranks) * sizeof(float);
    MP_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "stream");
    MP_CHECK(cudaMalloc(&in, bytes) == cudaSuccess, "cudaMalloc");
    MP_CHECK(cudaMalloc(&out, bytes) == cudaSuccess, "cudaMalloc");
    MP_CHECK(cudaMallocHost(&pinned, bytes) == cudaSuccess, "cudaMallocHost");
  }
  void release() {
    cudaFree(in);
    cudaFree(out);
    cudaFreeHost(pinned);
    cudaStreamDestroy(stream);
  }
  void toDevice(float* d, const std::vector<float>& h) {
    std::copy(h.begin(), h.end(), pinned);
    MP_CHECK(cudaMemcpyAsync(d, pinned, h.size() * sizeof(float), cudaMemcpyHostToDevice, stream) == cudaSuccess,
             "copy");
    MP_CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "sync");  // before `pinned` is written again
  }
  // On the rank's stream: a cudaMemcpy would wait for the other thread rank's
  // kernel, which waits for this rank's next call.
  std::vector<float> fromDevice(const float* d, size_t count) {
    MP_CHECK(cudaMemcpyAsync(pinned, d, count * sizeof(float), cudaMemcpyDeviceToHost, stream) == cudaSuccess,
             "copy back");
    MP_CHECK(cudaStreamSynchronize(stream) == cudaSuccess, "sync");
    return std::vector<float>(pinned, pinned + count);
  }
};

// Allreduce, allgather, reduce-scatter and broadcast of `count` floats per
// rank on device buffers, then an allreduce on host buffers and one more on
// device buffers, each checked.
void collectives(ncclComm_t comm, int rank, int nranks, size_t count, RankBuffers& b) {
  MP_CHECK(count <= kMaxCount, "count");
  const cudaStream_t stream = b.stream;
  float* in = b.in;
  float* out = b.out;
  std::vector<float> mine(count * size_t(nranks));
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = valueOf(rank, i);
  b.toDevice(in, mine);

  MP_NCCL_CHECK(ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, stream));
  std::vector<float> got = b.fromDevice(out, count);
  for (size_t i = 0; i < count; ++i)
    MP_EXPECT(got[i] == sumOf(nranks, i), "rank %d allreduce of %zu: element %zu is %g, want %g", rank, count, i,
              got[i], sumOf(nranks, i));

  MP_NCCL_CHECK(ncclAllGather(in, out, count, ncclFloat32, comm, stream));
  got = b.fromDevice(out, count * size_t(nranks));
  for (int r = 0; r < nranks; ++r)
    for (size_t i = 0; i < count; ++i)
      MP_EXPECT(got[size_t(r) * count + i] == valueOf(r, i), "rank %d allgather of %zu: rank %d's element %zu is %g",
                rank, count, r, i, got[size_t(r) * count + i]);

  MP_NCCL_CHECK(ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, comm, stream));
  got = b.fromDevice(out, count);
  for (size_t i = 0; i < count; ++i) {
    const size_t at = size_t(rank) * count + i;
    MP_EXPECT(got[i] == sumOf(nranks, at), "rank %d reduce-scatter of %zu: element %zu is %g, want %g", rank, count,
              i, got[i], sumOf(nranks, at));
  }

  MP_NCCL_CHECK(ncclBroadcast(in, out, count, ncclFloat32, nranks - 1, comm, stream));
  got = b.fromDevice(out, count);
  for (size_t i = 0; i < count; ++i)
    MP_EXPECT(got[i] == valueOf(nranks - 1, i), "rank %d broadcast of %zu: element %zu is %g", rank, count, i, got[i]);

  // A call on host buffers in between: the host lanes' bridge has
  // connections of its own (shared ones would cross the two bridges' messages).
  std::vector<float> hostSum(count);
  MP_NCCL_CHECK(ncclAllReduce(mine.data(), hostSum.data(), count, ncclFloat32, ncclSum, comm, nullptr));
  for (size_t i = 0; i < count; ++i)
    MP_EXPECT(hostSum[i] == sumOf(nranks, i), "rank %d host allreduce of %zu: element %zu is %g", rank, count, i,
              hostSum[i]);
  MP_NCCL_CHECK(ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, stream));
  got = b.fromDevice(out, count);
  for (size_t i = 0; i < count; ++i)
    MP_EXPECT(got[i] == sumOf(nranks, i), "rank %d allreduce after the host call: element %zu is %g", rank, i, got[i]);

  ncclResult_t async = ncclSuccess;
  MP_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
  MP_EXPECT(async == ncclSuccess, "rank %d: asynchronous error %d: %s", rank, int(async), ncclGetLastError(comm));
}

// An allreduce captured in a CUDA graph (BRAID_GRAPH_ENGINE=kernels), the
// graph launched three times with new inputs: captured as a plan kernel, its
// FIFOs bridged; braid makes no call at the launches, and each launch's watch
// starts the communicator's pump (without it the lanes wait for ever).
void capturedAllReduces(ncclComm_t comm, int rank, int nranks, RankBuffers& b) {
  constexpr size_t kCount = 4099;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  MP_CHECK(cudaStreamBeginCapture(b.stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess, "begin capture");
  MP_NCCL_CHECK(ncclAllReduce(b.in, b.out, kCount, ncclFloat32, ncclSum, comm, b.stream));
  MP_CHECK(cudaStreamEndCapture(b.stream, &graph) == cudaSuccess, "end capture");
  MP_CHECK(cudaGraphInstantiateWithFlags(&exec, graph, 0) == cudaSuccess, "instantiate");
  for (int launch = 1; launch <= 3; ++launch) {
    std::vector<float> mine(kCount);
    for (size_t i = 0; i < kCount; ++i) mine[i] = valueOf(rank, i) * float(launch);
    b.toDevice(b.in, mine);
    MP_CHECK(cudaGraphLaunch(exec, b.stream) == cudaSuccess, "launch");
    const std::vector<float> got = b.fromDevice(b.out, kCount);
    for (size_t i = 0; i < kCount; ++i)
      MP_EXPECT(got[i] == sumOf(nranks, i) * float(launch), "rank %d, launch %d: element %zu is %g, want %g", rank,
                launch, i, got[i], sumOf(nranks, i) * float(launch));
  }
  ncclResult_t async = ncclSuccess;
  MP_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
  MP_EXPECT(async == ncclSuccess, "rank %d: asynchronous error %d: %s", rank, int(async), ncclGetLastError(comm));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

mptest::RankOptions optionsLoggingTo(const std::string& dir) {
  mptest::RankOptions o;
  o.timeoutSeconds = 120;
  o.env = {{"BRAID_DEVICE_ENGINE", "kernels"},
           {"BRAID_MULTIHOST_ENGINE", "kernels"},
           {"NCCL_DEBUG", "INFO"},
           {"NCCL_DEBUG_SUBSYS", "INIT,COLL"},
           {"NCCL_DEBUG_FILE", dir + "/rank.%p.log"}};
  return o;
}

#if defined(BRAID_BRIDGED_FIFOS_ON_GPU)
// A real GPU: no recorder, and launches are not counted (the log says how
// FIFOs were made).
size_t unexpectedViolations() { return 0; }
bool planKernelsRan() { return true; }
bool noPlanKernelRan() { return true; }
#else
// The recorder's failures in this process (a child's gtest failure is not
// the parent's): synchronising calls of braid's while a kernel was outstanding.
size_t unexpectedViolations() {
  size_t n = 0;
  for (const fakecuda::Violation& v : fakecuda::violations()) n += !v.expected;
  return n;
}
bool planKernelsRan() { return fakecuda::takeMostPlanLanes() > 0; }
bool noPlanKernelRan() { return fakecuda::takeMostPlanLanes() == 0; }
#endif

using mptest::countContaining;

// Inside a rank: this process is host `host` (BRAID_HOSTID), on device 0.
ncclComm_t joinOnHost(const std::string& host, int rank, int nranks, const ncclUniqueId& id) {
  setenv("BRAID_HOSTID", host.c_str(), 1);
  MP_CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice");
  ncclComm_t comm = nullptr;
  MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
  return comm;
}

// Three hosts of one rank each: every FIFO is bridged.
TEST(BridgedDeviceFifos, RanksOnThreeHostsRunCollectivesAsPlanKernels) {
  GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonForked());  // this process stays free of CUDA
  const std::string dir = mptest::makeLogDir("braid_bridged_fifos_");
  ASSERT_FALSE(dir.empty());
  mptest::runRanks(
      3,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = joinOnHost("bridged-host-" + std::to_string(rank), rank, nranks, id);
        RankBuffers b;
        b.make(nranks);
        for (size_t count : {size_t(1), size_t(4099), size_t(300000)}) collectives(comm, rank, nranks, count, b);
        // Plan kernels ran in this process (a staged call launches none).
        MP_EXPECT(planKernelsRan(), "rank %d: no plan kernel was launched", rank);
        MP_NCCL_CHECK(ncclCommDestroy(comm));
        b.release();
        MP_EXPECT(unexpectedViolations() == 0, "rank %d: braid made a synchronising call", rank);
      },
      optionsLoggingTo(dir));
  const std::vector<std::string> lines = mptest::readLogLines(dir);
  EXPECT_GT(countContaining(lines, "bulk slots in mapped pinned host memory"), 0u)
      << "no lane FIFO was bridged through mapped pinned memory";
  EXPECT_EQ(countContaining(lines, "(cuda)"), 0u) << "a FIFO with another host was made in device memory";
}

// Two hosts of two ranks each, a thread per rank: FIFOs within a process are
// device memory, those between the hosts bridged; then each rank's captured
// allreduce, its graph launched three times, captured under `graphEngine`.
void twoHostsOfTwoRanks(const char* graphEngine) {
  const std::string dir = mptest::makeLogDir("braid_bridged_fifos_");
  ASSERT_FALSE(dir.empty());
  mptest::RankOptions o = optionsLoggingTo(dir);
  o.env.push_back({"BRAID_GRAPH_ENGINE", graphEngine});
  constexpr int kPerHost = 2;
  mptest::runRanks(
      2,
      [](int host, int hosts, const ncclUniqueId& id) {
        setenv("BRAID_HOSTID", host ? "bridged-host-b" : "bridged-host-a", 1);
        MP_CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice");
        RankBuffers bufs[kPerHost];
        for (RankBuffers& b : bufs) b.make(hosts * kPerHost);
        std::atomic<int> done{0};
        std::vector<std::thread> threads;
        for (int k = 0; k < kPerHost; ++k)
          threads.emplace_back([&, k] {
            const int rank = host * kPerHost + k;
            MP_CHECK(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice");
            ncclComm_t comm = nullptr;
            MP_NCCL_CHECK(ncclCommInitRank(&comm, hosts * kPerHost, id, rank));
            for (size_t count : {size_t(4099), size_t(100000)})
              collectives(comm, rank, hosts * kPerHost, count, bufs[k]);
            // Each thread rank captures its own stream: a group of one
            // communicator, its FIFOs in device memory and bridged.
            capturedAllReduces(comm, rank, hosts * kPerHost, bufs[k]);
            // Destroyed once the other thread rank's work is done too, as
            // the perf tools' -t does.
            done.fetch_add(1);
            while (done.load() < kPerHost) std::this_thread::yield();
            MP_NCCL_CHECK(ncclCommDestroy(comm));
          });
        for (std::thread& t : threads) t.join();
        for (RankBuffers& b : bufs) b.release();
        MP_EXPECT(planKernelsRan(), "host %d: no plan kernel was launched", host);
        // A bridged FIFO made by cudaHostAlloc while the other rank's kernel
        // waits would be one (on a GPU it may wait for that kernel).
        MP_EXPECT(unexpectedViolations() == 0, "host %d: braid made a synchronising call", host);
      },
      o);
  const std::vector<std::string> lines = mptest::readLogLines(dir);
  EXPECT_GT(countContaining(lines, "bulk slots in mapped pinned host memory"), 0u) << "no FIFO was bridged";
  EXPECT_GT(countContaining(lines, "(cuda arena)") + countContaining(lines, "(cuda)"), 0u)
      << "no FIFO within a host was in device memory";
  const size_t staged = countContaining(lines, "a CUDA graph captures this group's device calls: staged");
  if (std::string(graphEngine) == "kernels") EXPECT_EQ(staged, 0u) << "the captured calls were staged";
  else EXPECT_GT(staged, 0u) << "the captured calls were not staged";
}

TEST(BridgedDeviceFifos, TwoHostsOfTwoRanksMixDeviceAndBridgedFifos) {
  GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonForked());  // this process stays free of CUDA
  twoHostsOfTwoRanks("kernels");
}

// The same with the captures staged (BRAID_GRAPH_ENGINE's default): the
// tickets of the graphs' launches were a cudaHostAlloc at the first capture,
// while the other thread rank's kernel waited (caught here).
TEST(BridgedDeviceFifos, TwoHostsOfTwoRanksCapturedStaged) {
  GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonForked());  // this process stays free of CUDA
  twoHostsOfTwoRanks("staged");
}

TEST(BridgedDeviceFifos, CapturedCallsOnThreeHostsRunAsPlanKernels) {
  GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonForked());  // this process stays free of CUDA
  const std::string dir = mptest::makeLogDir("braid_bridged_fifos_");
  ASSERT_FALSE(dir.empty());
  mptest::RankOptions o = optionsLoggingTo(dir);
  o.env.push_back({"BRAID_GRAPH_ENGINE", "kernels"});
  mptest::runRanks(
      3,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = joinOnHost("captured-host-" + std::to_string(rank), rank, nranks, id);
        RankBuffers b;
        b.make(nranks);
        capturedAllReduces(comm, rank, nranks, b);
        MP_EXPECT(planKernelsRan(), "rank %d: no plan kernel was captured", rank);
        MP_NCCL_CHECK(ncclCommDestroy(comm));
        b.release();
        MP_EXPECT(unexpectedViolations() == 0, "rank %d: braid made a synchronising call", rank);
      },
      o);
  const std::vector<std::string> lines = mptest::readLogLines(dir);
  EXPECT_EQ(countContaining(lines, "a CUDA graph captures this group's device calls: staged"), 0u)
      << "the captured calls were staged";
  EXPECT_GT(countContaining(lines, "bulk slots in mapped pinned host memory"), 0u) << "no FIFO was bridged";
}

// Without BRAID_MULTIHOST_ENGINE=kernels (the default until a GPU has run
// them) such communicators are staged: right results, no plan kernel.
TEST(BridgedDeviceFifos, ByDefaultRanksOnTwoHostsAreStaged) {
  GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonForked());  // this process stays free of CUDA
  mptest::RankOptions o;
  o.env = {{"BRAID_DEVICE_ENGINE", "kernels"}};
  mptest::runRanks(
      2,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = joinOnHost("staged-host-" + std::to_string(rank), rank, nranks, id);
        RankBuffers b;
        b.make(nranks);
        collectives(comm, rank, nranks, 4099, b);
        MP_EXPECT(noPlanKernelRan(), "rank %d: a plan kernel was launched", rank);
        MP_NCCL_CHECK(ncclCommDestroy(comm));
        b.release();
      },
      o);
}

// A rank that leaves after the first call: the others' next call ends within
// moments (their lanes wait on its closed connection, or on a rank that
// failed because of it), long before BRAID_TIMEOUT, with an error naming it.
TEST(BridgedDeviceFifos, ALostPeerEndsTheOthersWithAnErrorNamingIt) {
  GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonForked());  // this process stays free of CUDA
  mptest::RankOptions o;
  o.timeoutSeconds = 120;
  o.env = {{"BRAID_DEVICE_ENGINE", "kernels"}, {"BRAID_MULTIHOST_ENGINE", "kernels"}, {"BRAID_TIMEOUT", "100"}};
  mptest::runRanks(
      3,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = joinOnHost("lost-host-" + std::to_string(rank), rank, nranks, id);
        RankBuffers b;
        b.make(nranks);
        collectives(comm, rank, nranks, 4099, b);
        // Every rank has its results (a call on host buffers as a barrier):
        // then rank 2 leaves without a word, its sockets closing.
        int one = 1, ranks = 0;
        MP_NCCL_CHECK(ncclAllReduce(&one, &ranks, 1, ncclInt32, ncclSum, comm, nullptr));
        if (rank == 2) _exit(0);
        const size_t count = 1 << 16;
        const auto start = std::chrono::steady_clock::now();
        const ncclResult_t issued = ncclAllReduce(b.in, b.in, count, ncclFloat32, ncclSum, comm, b.stream);
        if (issued == ncclSuccess) MP_CHECK(cudaStreamSynchronize(b.stream) == cudaSuccess, "sync");
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        ncclResult_t async = ncclSuccess;
        MP_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
        MP_EXPECT(issued != ncclSuccess || async != ncclSuccess, "rank %d: the call without rank 2 succeeded", rank);
        const std::string why = ncclGetLastError(comm);
        MP_EXPECT(why.find("rank 2") != std::string::npos, "rank %d: the error does not name rank 2: %s", rank,
                  why.c_str());
        MP_EXPECT(seconds < 30, "rank %d: the error took %.1f s", rank, seconds);
        MP_NCCL_CHECK(ncclCommAbort(comm));
        b.release();
      },
      o);
}

}  // namespace
