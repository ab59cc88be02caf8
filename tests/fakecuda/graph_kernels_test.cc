// Plan kernels captured in CUDA graphs (BRAID_GRAPH_ENGINE=kernels), on the
// fake runtime's stream capture (fake_capture.h), under the recorder: a
// thread per rank captures its own calls on its own stream, as one process
// per GPU under PyTorch's CUDA graphs does, and replays them. Every launch of
// a graph must run the captured plan kernel on that launch's inputs, with no
// CUDA call of braid's between launches; a launch whose peer never launches
// must end at BRAID_TIMEOUT with the communicator's error set (the launch
// counts itself, and the watch thread watches it); and graphs may outlive
// their communicators. tests/gpu builds the same file for a real GPU
// (BRAID_GRAPH_KERNELS_ON_GPU: no fake to count the CUDA calls).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "braid.h"
#include "common/scoped_env.h"
#include "gpu_env.h"
#if !defined(BRAID_GRAPH_KERNELS_ON_GPU)
#include "fakecuda.h"
#endif

namespace {

constexpr int kRanks = 2;
constexpr size_t kCount = 4099;  // not a multiple of the ranks, the lanes or a vector

// A rank: its communicator, stream, buffers and the graph of its calls.
struct Rank {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  float* sum = nullptr;       // allreduced in place
  float* gathered = nullptr;  // allgather of `part`
  float* part = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

bool streamFinishes(cudaStream_t s, std::chrono::seconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < until) {
    if (cudaStreamQuery(s) == cudaSuccess) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// Runs fn(r) on a thread per rank and returns each thread's failure ("" if none).
std::vector<std::string> onEachRank(const std::function<std::string(int)>& fn) {
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      if (cudaSetDevice(0) != cudaSuccess) return void(errors[r] = "cudaSetDevice");
      errors[r] = fn(r);
    });
  for (std::thread& t : threads) t.join();
  return errors;
}

class GraphKernels : public testing::Test {
 protected:
  void SetUp() override {
    GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonHere());
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    ncclComm_t comms[kRanks] = {};
    int devs[kRanks] = {};
    {
      std::vector<std::pair<std::string, std::string>> env = {{"BRAID_DEVICE_ENGINE", "kernels"},
                                                              {"BRAID_GRAPH_ENGINE", "kernels"}};
      if (channels_ != 0) {
        env.emplace_back("BRAID_NCHANNELS", std::to_string(channels_));
        env.emplace_back("NCCL_ALGO", "Ring");
      }
      const braidtest::ScopedEnv scoped(env);
      ASSERT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
    }
    // The application's allocations come first: the recorder judges braid's.
    for (int r = 0; r < kRanks; ++r) {
      Rank& k = ranks_[r];
      k.comm = comms[r];
      ASSERT_EQ(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&k.sum, kCount * sizeof(float)), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&k.part, kCount * sizeof(float)), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&k.gathered, kRanks * kCount * sizeof(float)), cudaSuccess);
    }
  }

  void TearDown() override {
    destroyGraphs();
    for (Rank& k : ranks_) {
      if (k.comm) ncclCommAbort(k.comm);
      for (float* p : {k.sum, k.part, k.gathered}) cudaFree(p);
      if (k.stream) cudaStreamDestroy(k.stream);
    }
  }

  void destroyGraphs() {
    for (Rank& k : ranks_) {
      if (k.exec) cudaGraphExecDestroy(k.exec);
      if (k.graph) cudaGraphDestroy(k.graph);
      k.exec = nullptr;
      k.graph = nullptr;
    }
  }

  // Each rank, on its own thread, captures an allreduce and an allgather on
  // its stream (thread-local mode; or `calls`) and instantiates the graph.
  void captureOnEachRank(const std::function<ncclResult_t(int r, Rank&)>& calls = {}) {
    const auto errors = onEachRank([this, &calls](int r) -> std::string {
      Rank& k = ranks_[r];
      if (cudaStreamBeginCapture(k.stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return "begin";
      ncclResult_t a = ncclSuccess;
      if (calls) {
        a = calls(r, k);
      } else {
        a = ncclAllReduce(k.sum, k.sum, kCount, ncclFloat32, ncclSum, k.comm, k.stream);
        if (a == ncclSuccess) a = ncclAllGather(k.part, k.gathered, kCount, ncclFloat32, k.comm, k.stream);
      }
      const std::string message = ncclGetLastError(k.comm);
      const cudaError_t ended = cudaStreamEndCapture(k.stream, &k.graph);
      if (a != ncclSuccess) return "capture: " + message;
      if (ended != cudaSuccess) return std::string("end capture: ") + cudaGetErrorName(ended);
      if (cudaGraphInstantiateWithFlags(&k.exec, k.graph, 0) != cudaSuccess) return "instantiate";
      return "";
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  }

  // Each rank, on its own thread, launches its graph and waits for it.
  void launchOnEachRank() {
    const auto errors = onEachRank([this](int r) -> std::string {
      if (cudaGraphLaunch(ranks_[r].exec, ranks_[r].stream) != cudaSuccess) return "launch";
      if (!streamFinishes(ranks_[r].stream, std::chrono::seconds(60))) return "the launch never ended";
      return cudaStreamSynchronize(ranks_[r].stream) == cudaSuccess ? "" : "sync";
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  }

  // Inputs of launch `launch`: rank r's element i is r + launch + i % 7.
  static float input(int r, int launch, size_t i) { return float(r + launch) + float(i % 7); }

  void writeInputs(int launch) {
    for (int r = 0; r < kRanks; ++r) {
      std::vector<float> in(kCount), part(kCount);
      for (size_t i = 0; i < kCount; ++i) {
        in[i] = input(r, launch, i);
        part[i] = input(r, launch, i) * 2;
      }
      ASSERT_EQ(cudaMemcpy(ranks_[r].sum, in.data(), kCount * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(ranks_[r].part, part.data(), kCount * sizeof(float), cudaMemcpyHostToDevice),
                cudaSuccess);
    }
  }

  void expectResults(int launch) {
    for (int r = 0; r < kRanks; ++r) {
      std::vector<float> sum(kCount), gathered(kRanks * kCount);
      ASSERT_EQ(cudaMemcpy(sum.data(), ranks_[r].sum, kCount * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(gathered.data(), ranks_[r].gathered, gathered.size() * sizeof(float),
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      for (size_t i = 0; i < kCount; ++i) {
        float want = 0;
        for (int p = 0; p < kRanks; ++p) want += input(p, launch, i);
        ASSERT_EQ(sum[i], want) << "rank " << r << " sum " << i;
        for (int p = 0; p < kRanks; ++p)
          ASSERT_EQ(gathered[p * kCount + i], input(p, launch, i) * 2) << "rank " << r << " from " << p << " " << i;
      }
    }
  }

  Rank ranks_[kRanks];
  int channels_ = 0;  // BRAID_NCHANNELS of the communicators, then ring (0: the default)
};

// Calls of two channels: two lanes, two blocks, per plan kernel. A ring's:
// the cost model, with this host's calibration, may choose an algorithm of
// one lane for the test's size (it did with alpha_shm at 3.7 us).
class GraphKernelsOnTwoChannels : public GraphKernels {
 protected:
  GraphKernelsOnTwoChannels() { channels_ = 2; }
};


// Captured as plan kernels (not staged: a plan launch noted at capture, no
// host function in the graph); each launch, from every rank's thread at once,
// on new inputs; no allocation, host function, event or pinned block of
// braid's per launch.
TEST_F(GraphKernels, EachRanksGraphRunsEveryLaunchOnItsInputs) {
#if !defined(BRAID_GRAPH_KERNELS_ON_GPU)
  (void)fakecuda::takeMostPlanLanes();
  const uint64_t hostFunctionsBefore = fakecuda::hostFunctionsLaunched();
#endif
  ASSERT_NO_FATAL_FAILURE(captureOnEachRank());
#if !defined(BRAID_GRAPH_KERNELS_ON_GPU)
  EXPECT_GT(fakecuda::takeMostPlanLanes(), 0u) << "no plan kernel was captured";
  EXPECT_EQ(fakecuda::hostFunctionsLaunched(), hostFunctionsBefore) << "the graphs hold host functions";
  const uint64_t hostFunctions = fakecuda::hostFunctionsLaunched();
  const uint64_t allocations = fakecuda::streamOrderedAllocations();
  const uint64_t pinned = fakecuda::pinnedAllocations();
  const uint64_t records = fakecuda::eventRecords();
  const uint64_t kernels = fakecuda::launchesTracked();
#endif
  constexpr int kLaunches = 4;
  for (int launch = 0; launch < kLaunches; ++launch) {
    SCOPED_TRACE("launch " + std::to_string(launch));
    ASSERT_NO_FATAL_FAILURE(writeInputs(launch));
    ASSERT_NO_FATAL_FAILURE(launchOnEachRank());
    ASSERT_NO_FATAL_FAILURE(expectResults(launch));
  }
#if !defined(BRAID_GRAPH_KERNELS_ON_GPU)
  EXPECT_EQ(fakecuda::launchesTracked() - kernels, uint64_t(kLaunches * kRanks * 2 * 2))
      << "each launch of a rank's graph runs, per captured call, the launch-mark kernel and the plan kernel";
  EXPECT_EQ(fakecuda::hostFunctionsLaunched(), hostFunctions);
  EXPECT_EQ(fakecuda::streamOrderedAllocations(), allocations);
  EXPECT_EQ(fakecuda::pinnedAllocations(), pinned);
  EXPECT_EQ(fakecuda::eventRecords(), records);
#endif
  for (const Rank& k : ranks_) {
    ncclResult_t async = ncclInProgress;
    ASSERT_EQ(ncclCommGetAsyncError(k.comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess);
  }
  // Calls outside the graphs continue on the same FIFOs after the launches.
  ASSERT_NO_FATAL_FAILURE(writeInputs(kLaunches));
  const auto errors = onEachRank([this](int r) -> std::string {
    Rank& k = ranks_[r];
    if (ncclAllReduce(k.sum, k.sum, kCount, ncclFloat32, ncclSum, k.comm, k.stream) != ncclSuccess ||
        ncclAllGather(k.part, k.gathered, kCount, ncclFloat32, k.comm, k.stream) != ncclSuccess)
      return ncclGetLastError(k.comm);
    return cudaStreamSynchronize(k.stream) == cudaSuccess ? "" : "sync";
  });
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  ASSERT_NO_FATAL_FAILURE(expectResults(kLaunches));
}

// Each launch is watched: after launches that ended well, a launch whose peer
// never launches its graph ends at the timeout, and the communicator reports
// it.
TEST_F(GraphKernels, ALaunchWhosePeerNeverLaunchesEndsAtTheTimeout) {
  ASSERT_NO_FATAL_FAILURE(captureOnEachRank());
  for (int launch = 0; launch < 2; ++launch) {
    ASSERT_NO_FATAL_FAILURE(writeInputs(launch));
    const auto errors = onEachRank([this](int r) -> std::string {
      if (cudaGraphLaunch(ranks_[r].exec, ranks_[r].stream) != cudaSuccess) return "launch";
      return cudaStreamSynchronize(ranks_[r].stream) == cudaSuccess ? "" : "sync";
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  }
  ASSERT_EQ(braidCommSetTimeout(ranks_[0].comm, 1.0), ncclSuccess);
  ASSERT_EQ(cudaGraphLaunch(ranks_[0].exec, ranks_[0].stream), cudaSuccess);
  EXPECT_TRUE(streamFinishes(ranks_[0].stream, std::chrono::seconds(30)))
      << "a launch whose peer never launched is still waiting";
  ncclResult_t async = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(ranks_[0].comm, &async), ncclSuccess);
  EXPECT_NE(async, ncclSuccess);
  EXPECT_NE(async, ncclInProgress);
  const std::string message = ncclGetLastError(ranks_[0].comm);
  EXPECT_NE(message.find("rank 0"), std::string::npos) << message;
}

// ncclCommAbort ends a launch whose peer never launches its graph, before any
// timeout.
TEST_F(GraphKernels, AbortEndsALaunchWhosePeerNeverLaunches) {
  ASSERT_NO_FATAL_FAILURE(captureOnEachRank());
  ASSERT_EQ(cudaGraphLaunch(ranks_[0].exec, ranks_[0].stream), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(cudaStreamQuery(ranks_[0].stream), cudaErrorNotReady) << "rank 0's launch ended without its peer";
  EXPECT_EQ(ncclCommAbort(ranks_[0].comm), ncclSuccess);
  ranks_[0].comm = nullptr;
  EXPECT_TRUE(streamFinishes(ranks_[0].stream, std::chrono::seconds(30))) << "the aborted launch still waits";
}

// A wire type (bfloat16 on the wire, float32 sums) in captured plan kernels:
// at every launch each rank gets the same bits, within bfloat16's rounding of
// the float32 sum, and the rounding shows.
TEST_F(GraphKernels, WireTypeLaunchesGiveEveryRankTheSameBits) {
  for (Rank& k : ranks_) ASSERT_EQ(braidCommSetWireType(k.comm, ncclBfloat16), ncclSuccess);
  const auto captured = onEachRank([this](int r) -> std::string {
    Rank& k = ranks_[r];
    if (cudaStreamBeginCapture(k.stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return "begin";
    const ncclResult_t a = ncclAllReduce(k.part, k.sum, kCount, ncclFloat32, ncclSum, k.comm, k.stream);
    const std::string message = ncclGetLastError(k.comm);
    const cudaError_t ended = cudaStreamEndCapture(k.stream, &k.graph);
    if (a != ncclSuccess) return "capture: " + message;
    if (ended != cudaSuccess) return std::string("end capture: ") + cudaGetErrorName(ended);
    return cudaGraphInstantiateWithFlags(&k.exec, k.graph, 0) == cudaSuccess ? "" : "instantiate";
  });
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(captured[r], "") << "rank " << r;
  auto value = [](int r, int launch, size_t i) { return float(r + 1) * (1.0f + float(i) * 1e-4f) + float(launch); };
  for (int launch = 0; launch < 3; ++launch) {
    SCOPED_TRACE("launch " + std::to_string(launch));
    for (int r = 0; r < kRanks; ++r) {
      std::vector<float> in(kCount);
      for (size_t i = 0; i < kCount; ++i) in[i] = value(r, launch, i);
      ASSERT_EQ(cudaMemcpy(ranks_[r].part, in.data(), kCount * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    }
    const auto errors = onEachRank([this](int r) -> std::string {
      if (cudaGraphLaunch(ranks_[r].exec, ranks_[r].stream) != cudaSuccess) return "launch";
      return cudaStreamSynchronize(ranks_[r].stream) == cudaSuccess ? "" : "sync";
    });
    for (int r = 0; r < kRanks; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
    std::vector<std::vector<float>> got(kRanks, std::vector<float>(kCount));
    for (int r = 0; r < kRanks; ++r)
      ASSERT_EQ(cudaMemcpy(got[r].data(), ranks_[r].sum, kCount * sizeof(float), cudaMemcpyDeviceToHost),
                cudaSuccess);
    size_t rounded = 0;
    for (size_t i = 0; i < kCount; ++i) {
      float want = 0;
      for (int p = 0; p < kRanks; ++p) want += value(p, launch, i);
      ASSERT_EQ(std::memcmp(&got[0][i], &got[1][i], sizeof(float)), 0) << "element " << i << " differs by rank";
      ASSERT_LE(std::fabs(got[0][i] - want), std::fabs(want) / 64) << "element " << i;
      rounded += got[0][i] != want;
    }
    EXPECT_GT(rounded, kCount / 2) << "the sums are float32's: no wire type ran";
  }
}

// Each captured plan kernel carries its lane image in its parameters (no
// copy of it in the graph) and writes it on every replay, gated by the
// graph's launch count: with block 0 held back (the fake's
// BRAID_FAKECUDA_SLOW_IMAGE), the lane of block 1 would otherwise run on the
// state the previous replay left there.
TEST_F(GraphKernelsOnTwoChannels, EachReplayWritesTheImageItsLaunchCarries) {
  // The first capture also makes the FIFOs (copies of their own): counted
  // is the second.
  ASSERT_NO_FATAL_FAILURE(captureOnEachRank());
  destroyGraphs();
#if !defined(BRAID_GRAPH_KERNELS_ON_GPU)
  const uint64_t images = fakecuda::launchImages();
  const uint64_t copies = fakecuda::asyncCopies();
  (void)fakecuda::takeMostPlanLanes();
#endif
  ASSERT_NO_FATAL_FAILURE(captureOnEachRank());
#if !defined(BRAID_GRAPH_KERNELS_ON_GPU)
  EXPECT_GE(fakecuda::takeMostPlanLanes(), 2u) << "a plan kernel of fewer than two lanes";
  EXPECT_EQ(fakecuda::launchImages() - images, uint64_t(kRanks * 2)) << "a captured plan kernel uploads its image";
  EXPECT_EQ(fakecuda::asyncCopies(), copies) << "the graphs copy an image before their plan kernels";
#endif
  const braidtest::ScopedEnv slowImage({{std::string("BRAID_FAKECUDA_SLOW_IMAGE"), std::string("1")}});
  for (int launch = 0; launch < 3; ++launch) {
    SCOPED_TRACE("launch " + std::to_string(launch));
    ASSERT_NO_FATAL_FAILURE(writeInputs(launch));
    ASSERT_NO_FATAL_FAILURE(launchOnEachRank());
    ASSERT_NO_FATAL_FAILURE(expectResults(launch));
  }
  for (const Rank& k : ranks_) {
    ncclResult_t async = ncclInProgress;
    ASSERT_EQ(ncclCommGetAsyncError(k.comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess);
  }
}

// A captured plan kernel whose image is over the 3968 bytes a launch carries
// (a group of many calls) has it copied into the graph's device block before
// each replay.
TEST_F(GraphKernels, AnImageTooLargeToCarryIsCopiedBeforeEachReplay) {
  // The allreduce in 32 pieces and the allgather, in one group: one launch.
  constexpr size_t kPieces = 32;
  constexpr size_t kPiece = (kCount + kPieces - 1) / kPieces;
  const auto manyCalls = [](int, Rank& k) {
    (void)ncclGroupStart();
    for (size_t at = 0; at < kCount; at += kPiece)
      (void)ncclAllReduce(k.sum + at, k.sum + at, kCount - at < kPiece ? kCount - at : kPiece, ncclFloat32, ncclSum,
                          k.comm, k.stream);
    (void)ncclAllGather(k.part, k.gathered, kCount, ncclFloat32, k.comm, k.stream);
    return ncclGroupEnd();
  };
  ASSERT_NO_FATAL_FAILURE(captureOnEachRank(manyCalls));  // also makes the FIFOs
  destroyGraphs();
#if !defined(BRAID_GRAPH_KERNELS_ON_GPU)
  const uint64_t images = fakecuda::launchImages();
  const uint64_t copies = fakecuda::asyncCopies();
#endif
  ASSERT_NO_FATAL_FAILURE(captureOnEachRank(manyCalls));
#if !defined(BRAID_GRAPH_KERNELS_ON_GPU)
  EXPECT_EQ(fakecuda::launchImages(), images) << "a captured plan kernel carried an image too large to";
  EXPECT_EQ(fakecuda::asyncCopies() - copies, uint64_t(kRanks)) << "one image copy per captured launch";
#endif
  for (int launch = 0; launch < 3; ++launch) {
    SCOPED_TRACE("launch " + std::to_string(launch));
    ASSERT_NO_FATAL_FAILURE(writeInputs(launch));
    ASSERT_NO_FATAL_FAILURE(launchOnEachRank());
    ASSERT_NO_FATAL_FAILURE(expectResults(launch));
  }
}

// A PreMulSum whose scalar is in device memory (ncclScalarDevice), captured:
// each replay reads the value the scalar has when it runs, as NCCL's kernels
// do. Its image is copied before the kernel and the scalar into it after
// (a carried image, written by block 0, would write over the scalar).
TEST_F(GraphKernels, ADeviceScalarIsReadAtEachReplay) {
  float* scalars[kRanks] = {};
  ncclRedOp_t ops[kRanks] = {};
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaMalloc(&scalars[r], sizeof(float)), cudaSuccess);
    ASSERT_EQ(ncclRedOpCreatePreMulSum(&ops[r], scalars[r], ncclFloat32, ncclScalarDevice, ranks_[r].comm),
              ncclSuccess);
  }
#if !defined(BRAID_GRAPH_KERNELS_ON_GPU)
  const uint64_t images = fakecuda::launchImages();
#endif
  ASSERT_NO_FATAL_FAILURE(captureOnEachRank([&ops](int r, Rank& k) {
    return ncclAllReduce(k.sum, k.sum, kCount, ncclFloat32, ops[r], k.comm, k.stream);
  }));
#if !defined(BRAID_GRAPH_KERNELS_ON_GPU)
  EXPECT_EQ(fakecuda::launchImages(), images) << "a captured launch with a device scalar carried its image";
#endif
  int launch = 0;
  for (const float scalar : {2.0f, 3.0f, 0.5f}) {
    SCOPED_TRACE("scalar " + std::to_string(scalar));
    ASSERT_NO_FATAL_FAILURE(writeInputs(launch));
    for (float* s : scalars) ASSERT_EQ(cudaMemcpy(s, &scalar, sizeof scalar, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_NO_FATAL_FAILURE(launchOnEachRank());
    for (int r = 0; r < kRanks; ++r) {
      std::vector<float> sum(kCount);
      ASSERT_EQ(cudaMemcpy(sum.data(), ranks_[r].sum, kCount * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
      for (size_t i = 0; i < kCount; ++i) {
        float want = 0;
        for (int p = 0; p < kRanks; ++p) want += scalar * input(p, launch, i);
        ASSERT_EQ(sum[i], want) << "rank " << r << " element " << i;
      }
    }
    ++launch;
  }
  destroyGraphs();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(ncclRedOpDestroy(ops[r], ranks_[r].comm), ncclSuccess);
    cudaFree(scalars[r]);
  }
}

// Communicators destroyed while their graphs exist: no crash, and destroying
// the graphs afterwards is safe.
TEST_F(GraphKernels, GraphsMayOutliveTheirCommunicators) {
  ASSERT_NO_FATAL_FAILURE(captureOnEachRank());
  ASSERT_NO_FATAL_FAILURE(writeInputs(0));
  const auto errors = onEachRank([this](int r) -> std::string {
    if (cudaGraphLaunch(ranks_[r].exec, ranks_[r].stream) != cudaSuccess) return "launch";
    return cudaStreamSynchronize(ranks_[r].stream) == cudaSuccess ? "" : "sync";
  });
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(errors[r], "") << "rank " << r;
  ASSERT_NO_FATAL_FAILURE(expectResults(0));
  for (Rank& k : ranks_) {
    EXPECT_EQ(ncclCommDestroy(k.comm), ncclSuccess);
    k.comm = nullptr;
  }
  destroyGraphs();
}

}  // namespace
