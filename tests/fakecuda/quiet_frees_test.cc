// A communicator destroyed while another one's kernel waits: its pinned and
// device memory must not be freed then (cudaFreeHost and cudaFree may wait
// for the whole device, base/cuda_quiet_free.h). The recorder fails the test
// on any such free; the memory is kept and freed once no kernel of braid's is
// outstanding. The same while the waiting kernel is a launch of a CUDA graph
// (which braid does not see made): counted from the graph's host function
// (staged captures) or once the watch sees the launch counted (captured plan
// kernels).
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
  setenv("BRAID_GRAPH_ENGINE", std::string(engine) == "kernels" ? "kernels" : "staged", 1);
  int devs[2] = {0, 0};
  ASSERT_EQ(ncclCommInitAll(comms, 2, devs), ncclSuccess) << ncclGetLastError(nullptr);
  unsetenv("BRAID_DEVICE_ENGINE");
  unsetenv("BRAID_GRAPH_ENGINE");
}

// Two ranks' device buffers (rank r's elements r + 1) and streams, made by the
// application before the recorder judges braid's calls.
struct RankBuffers {
  int32_t* bufs[2] = {};
  cudaStream_t streams[2] = {};
  void make() {
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&bufs[r], kCount * sizeof(int32_t)), cudaSuccess);
      const std::vector<int32_t> init(kCount, r + 1);
      ASSERT_EQ(cudaMemcpy(bufs[r], init.data(), kCount * sizeof(int32_t), cudaMemcpyHostToDevice), cudaSuccess);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  void expectEach(int32_t want) {
    for (int r = 0; r < 2; ++r) {
      ASSERT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess);
      std::vector<int32_t> got(kCount);
      ASSERT_EQ(cudaMemcpy(got.data(), bufs[r], kCount * sizeof(int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(got[0], want) << "rank " << r;
      EXPECT_EQ(got[kCount - 1], want) << "rank " << r;
    }
  }
  ~RankBuffers() {
    for (int r = 0; r < 2; ++r) {
      cudaFree(bufs[r]);
      if (streams[r]) cudaStreamDestroy(streams[r]);
    }
  }
};

// Two pairs of communicators (pair a is destroyed while pair b's kernel
// waits) and pair b's buffers; the pinned allocations and frees before them.
class QuietFrees : public testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    allocatedBefore = fakecuda::pinnedAllocations();
    freedBefore = fakecuda::pinnedFrees();
    ASSERT_NO_FATAL_FAILURE(initPair(GetParam(), a));
    ASSERT_NO_FATAL_FAILURE(initPair(GetParam(), b));
    ASSERT_NO_FATAL_FAILURE(rb.make());
  }

  uint64_t allocatedBefore = 0;
  uint64_t freedBefore = 0;
  ncclComm_t a[2] = {};
  ncclComm_t b[2] = {};
  RankBuffers rb;
};

TEST_P(QuietFrees, ADestructionWhileAnotherCommunicatorsKernelWaitsFreesNothingUntilItEnds) {
  int32_t* const* bufs = rb.bufs;
  cudaStream_t* streams = rb.streams;
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
  ASSERT_NO_FATAL_FAILURE(rb.expectEach(6));  // 1 + 2 after the first call, twice that after the second
  EXPECT_EQ(ncclCommDestroy(b[0]), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(b[1]), ncclSuccess);
  // Once no kernel waits, everything both pairs made is freed.
  EXPECT_EQ(fakecuda::pinnedFrees() - freedBefore, fakecuda::pinnedAllocations() - allocatedBefore)
      << "the kept memory was not freed once no kernel waited";
}

// The waiting kernel is a launch of rank 0's CUDA graph, which braid does not
// see made: a staged capture's wait kernel is counted from the graph's host
// function on (it runs before that kernel starts) until the proxy publishes
// the launch's ticket; a captured plan kernel from when the watch sees the
// launch counted until its lanes end.
TEST_P(QuietFrees, ADestructionWhileAGraphLaunchWaitsFreesNothingUntilItEnds) {
  // Each rank of pair b captures an allreduce on its own thread, and replays
  // it once with its peer (plan kernels connect their FIFOs then).
  cudaGraph_t graphs[2] = {};
  cudaGraphExec_t execs[2] = {};
  std::string errors[2];
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      cudaSetDevice(0);
      if (cudaStreamBeginCapture(rb.streams[r], cudaStreamCaptureModeThreadLocal) != cudaSuccess)
        return void(errors[r] = "begin capture");
      const ncclResult_t called = ncclAllReduce(rb.bufs[r], rb.bufs[r], kCount, ncclInt32, ncclSum, b[r], rb.streams[r]);
      const cudaError_t ended = cudaStreamEndCapture(rb.streams[r], &graphs[r]);
      if (called != ncclSuccess || ended != cudaSuccess) return void(errors[r] = "capture");
      if (cudaGraphInstantiateWithFlags(&execs[r], graphs[r], 0) != cudaSuccess)
        return void(errors[r] = "instantiate");
      if (cudaGraphLaunch(execs[r], rb.streams[r]) != cudaSuccess) return void(errors[r] = "launch");
      if (cudaStreamSynchronize(rb.streams[r]) != cudaSuccess) errors[r] = "sync";
    });
  for (auto& t : ranks) t.join();
  ASSERT_EQ(errors[0], "");
  ASSERT_EQ(errors[1], "");
  // Rank 0 launches again; its kernel waits for rank 1's launch.
  ASSERT_EQ(cudaGraphLaunch(execs[0], rb.streams[0]), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(cudaStreamQuery(rb.streams[0]), cudaErrorNotReady) << "rank 0's launch did not wait for rank 1's";
  EXPECT_EQ(ncclCommDestroy(a[0]), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(a[1]), ncclSuccess);
  EXPECT_EQ(fakecuda::pinnedFrees(), freedBefore) << "a destruction freed memory while a graph's kernel waited";
  ASSERT_EQ(cudaGraphLaunch(execs[1], rb.streams[1]), cudaSuccess);
  ASSERT_NO_FATAL_FAILURE(rb.expectEach(6));  // 1 + 2 after the first launch, twice that after the second
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(cudaGraphExecDestroy(execs[r]), cudaSuccess);
    EXPECT_EQ(cudaGraphDestroy(graphs[r]), cudaSuccess);
  }
  EXPECT_EQ(ncclCommDestroy(b[0]), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(b[1]), ncclSuccess);
  EXPECT_EQ(fakecuda::pinnedFrees() - freedBefore, fakecuda::pinnedAllocations() - allocatedBefore)
      << "the kept memory was not freed once no kernel waited";
}

INSTANTIATE_TEST_SUITE_P(Engines, QuietFrees, testing::Values("staged", "kernels"),
                         [](const testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

}  // namespace
