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

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "fakecuda.h"

namespace {

constexpr int kRanks = 4;
constexpr int kRounds = 3;
const std::vector<size_t> kCounts = {256, 4096, 65536};  // int32: 1, 16 and 256 KiB

class ThreadRanks : public testing::TestWithParam<const char*> {};

// kRanks communicators on device 0 with the engine under test.
void initRanks(const char* engine, ncclComm_t* comms) {
  setenv("BRAID_DEVICE_ENGINE", engine, 1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  int devs[kRanks] = {};
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
  unsetenv("BRAID_DEVICE_ENGINE");
}

TEST_P(ThreadRanks, QueuedCallsOfSeveralSizesFromAThreadPerRank) {
  ncclComm_t comms[kRanks] = {};
  ASSERT_NO_FATAL_FAILURE(initRanks(GetParam(), comms));
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

// A thread per rank queueing hundreds of small calls between small calls of
// other types, as the perf tools do (`all_reduce_perf -t 4 -c 0`): a launch's
// lane beacons must not go to the next launch while the watch still reads
// them. Returned when the kernel ended but before the watch saw it, they were
// taken and zeroed by the next launch, and the watch read a step past its
// program's end: the process crashed in about one run in ten of this
// sequence (on an H200 too). Repeated to make that near certain.
TEST_P(ThreadRanks, ManySmallQueuedCallsBetweenAuxiliaryCalls) {
  ncclComm_t comms[kRanks] = {};
  ASSERT_NO_FATAL_FAILURE(initRanks(GetParam(), comms));
  std::vector<float*> send(kRanks), recv(kRanks);
  std::vector<double*> aux(kRanks);
  std::vector<cudaStream_t> streams(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&send[r], 2 * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&recv[r], 2 * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&aux[r], sizeof(double)), cudaSuccess);
    const float mine[2] = {float(r + 1), float(r + 1)};
    ASSERT_EQ(cudaMemcpy(send[r], mine, sizeof mine, cudaMemcpyHostToDevice), cudaSuccess);
  }
  constexpr int kRepeats = 30, kQueued = 400;
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      auto call = [&](ncclResult_t x) {
        if (x != ncclSuccess && errors[r].empty()) errors[r] = ncclGetLastError(comms[r]);
      };
      auto auxCall = [&](ncclDataType_t type, ncclRedOp_t op) {
        double v = r;
        cudaMemcpy(aux[r], &v, sizeof v, cudaMemcpyHostToDevice);
        call(ncclAllReduce(aux[r], aux[r], 1, type, op, comms[r], streams[r]));
        cudaStreamSynchronize(streams[r]);
        cudaMemcpy(&v, aux[r], sizeof v, cudaMemcpyDeviceToHost);
      };
      if (cudaSetDevice(0) != cudaSuccess) return void(errors[r] = "cudaSetDevice");
      for (int k = 0; k < kRepeats; ++k) {
        auxCall(ncclInt32, ncclSum);  // the tools' barrier
        for (int i = 0; i < kQueued; ++i)
          call(ncclAllReduce(send[r], recv[r], 2, ncclFloat32, ncclSum, comms[r], streams[r]));
        cudaStreamSynchronize(streams[r]);
        auxCall(ncclFloat64, ncclMax);  // the tools' time
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    float got[2] = {};
    ASSERT_EQ(cudaMemcpy(got, recv[r], sizeof got, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got[0], 10.0f) << "rank " << r;
    EXPECT_EQ(got[1], 10.0f) << "rank " << r;
  }
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
    cudaFree(send[r]);
    cudaFree(recv[r]);
    cudaFree(aux[r]);
    cudaStreamDestroy(streams[r]);
  }
}

// All-gather and scatter from a thread per rank, each thread destroying its
// own communicator once every rank's stream is done, as the perf tools' -t
// does (on an H200, staged, 4 ranks: scatter_perf and all_gather_perf stalled
// at their end before the kernels' code was loaded at creation). Calls larger
// than the reserve's blocks: staged_pieces_test.cc.
TEST_P(ThreadRanks, GatherAndScatterThenEachThreadDestroys) {
  ncclComm_t comms[kRanks] = {};
  ASSERT_NO_FATAL_FAILURE(initRanks(GetParam(), comms));
  constexpr size_t kCount = 16384 + 3;  // per rank, int32
  std::vector<int32_t*> send(kRanks), recv(kRanks);
  std::vector<cudaStream_t> streams(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&send[r], kCount * kRanks * sizeof(int32_t)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&recv[r], kCount * kRanks * sizeof(int32_t)), cudaSuccess);
    std::vector<int32_t> init(kCount * kRanks);
    for (size_t i = 0; i < init.size(); ++i) init[i] = int32_t(r * 1000003 + i);
    ASSERT_EQ(cudaMemcpy(send[r], init.data(), init.size() * sizeof(int32_t), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  std::vector<std::string> errors(kRanks);
  std::vector<std::vector<int32_t>> gathered(kRanks), scattered(kRanks);
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    auto work = [&, r] {
      auto fail = [&](const char* what) { errors[r] = std::string(what) + ": " + ncclGetLastError(comms[r]); };
      if (cudaSetDevice(0) != cudaSuccess) return void(errors[r] = "cudaSetDevice");
      for (int k = 0; k < kRounds; ++k) {
        if (ncclAllGather(send[r], recv[r], kCount, ncclInt32, comms[r], streams[r]) != ncclSuccess)
          return fail("ncclAllGather");
        if (cudaStreamSynchronize(streams[r]) != cudaSuccess) return void(errors[r] = "cudaStreamSynchronize");
        gathered[r].resize(kCount * kRanks);
        if (cudaMemcpy(gathered[r].data(), recv[r], gathered[r].size() * sizeof(int32_t), cudaMemcpyDeviceToHost) !=
            cudaSuccess)
          return void(errors[r] = "cudaMemcpy");
        if (ncclScatter(send[r], recv[r], kCount, ncclInt32, k % kRanks, comms[r], streams[r]) != ncclSuccess)
          return fail("ncclScatter");
      }
      if (cudaStreamSynchronize(streams[r]) != cudaSuccess) return void(errors[r] = "cudaStreamSynchronize");
      scattered[r].resize(kCount);
      if (cudaMemcpy(scattered[r].data(), recv[r], kCount * sizeof(int32_t), cudaMemcpyDeviceToHost) != cudaSuccess)
        return void(errors[r] = "cudaMemcpy");
    };
    threads.emplace_back([&, r, work] {
      work();
      done.fetch_add(1);
      while (done.load() < kRanks) std::this_thread::yield();  // every rank's device work has ended
      if (ncclCommDestroy(comms[r]) != ncclSuccess && errors[r].empty())
        errors[r] = std::string("ncclCommDestroy: ") + ncclGetLastError(comms[r]);
    });
  }
  for (auto& t : threads) t.join();
  const int lastRoot = (kRounds - 1) % kRanks;
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    for (int s = 0; s < kRanks; ++s)
      for (size_t i = 0; i < kCount; i += 997)
        ASSERT_EQ(gathered[r][s * kCount + i], int32_t(s * 1000003 + i)) << "rank " << r << " from " << s;
    for (size_t i = 0; i < kCount; i += 997)
      ASSERT_EQ(scattered[r][i], int32_t(lastRoot * 1000003 + r * kCount + i)) << "rank " << r;
    cudaFree(send[r]);
    cudaFree(recv[r]);
    cudaStreamDestroy(streams[r]);
  }
}

// One rank sets up a FIFO with a third while its peer's plan kernel already
// waits for it (the peer needed no new FIFO): the FIFO's image and its Port
// go to the device from pinned memory. From pageable memory the Port's copy
// waited inside the driver for ever, on an H200, while the application
// copied a result back from the peer's stream: two thread ranks per process,
// their peers on another host (bridged_fifos_test.cc). The recorder counts
// braid's pageable copies while a kernel is outstanding.
TEST(ThreadRanksConnecting, ARankMakesFifosWhileItsPeersKernelWaitsForItWithoutPageableCopies) {
  constexpr int kThree = 3;
  constexpr size_t kCount = 4099;
  setenv("BRAID_DEVICE_ENGINE", "kernels", 1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ncclComm_t comms[kThree] = {};
  int devs[kThree] = {};
  ASSERT_EQ(ncclCommInitAll(comms, kThree, devs), ncclSuccess) << ncclGetLastError(nullptr);
  unsetenv("BRAID_DEVICE_ENGINE");
  std::vector<float*> send(kThree), recv(kThree);
  std::vector<cudaStream_t> streams(kThree);
  for (int r = 0; r < kThree; ++r) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&send[r], kCount * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&recv[r], kCount * sizeof(float)), cudaSuccess);
    const std::vector<float> mine(kCount, float(r + 1));
    ASSERT_EQ(cudaMemcpy(send[r], mine.data(), kCount * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  // Each call from a thread of its own: a group spanning both ranks would
  // read the buffer in place and make no FIFO.
  auto onThread = [](auto work) { std::thread(work).join(); };
  std::string errors[kThree];
  std::thread sender([&] {
    if (ncclSend(send[0], kCount, ncclFloat32, 1, comms[0], streams[0]) != ncclSuccess)
      errors[0] = ncclGetLastError(comms[0]);
  });
  onThread([&] {
    if (ncclRecv(recv[1], kCount, ncclFloat32, 0, comms[1], streams[1]) != ncclSuccess)
      errors[1] = ncclGetLastError(comms[1]);
  });
  sender.join();
  for (int r = 0; r < 2; ++r) ASSERT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess);
  ASSERT_EQ(errors[0] + errors[1], "");

  // Rank 1 waits for rank 0, over the FIFO made above: no set-up.
  const uint64_t launched = fakecuda::launchesTracked();
  const size_t violationsBefore = fakecuda::violationCount();
  onThread([&] {
    if (ncclRecv(recv[1], kCount, ncclFloat32, 0, comms[1], streams[1]) != ncclSuccess)
      errors[1] = ncclGetLastError(comms[1]);
  });
  ASSERT_EQ(errors[1], "");
  ASSERT_GT(fakecuda::launchesTracked(), launched) << "rank 1's plan kernel was not launched";
  ASSERT_EQ(cudaStreamQuery(streams[1]), cudaErrorNotReady) << "rank 1's kernel must wait for rank 0";
  // Rank 0 now makes its FIFO from rank 2, then forwards rank 2's data to rank 1.
  std::thread third([&] {
    if (ncclSend(send[2], kCount, ncclFloat32, 0, comms[2], streams[2]) != ncclSuccess)
      errors[2] = ncclGetLastError(comms[2]);
  });
  onThread([&] {
    if (ncclRecv(recv[0], kCount, ncclFloat32, 2, comms[0], streams[0]) != ncclSuccess ||
        ncclSend(recv[0], kCount, ncclFloat32, 1, comms[0], streams[0]) != ncclSuccess)
      errors[0] = ncclGetLastError(comms[0]);
  });
  third.join();
  for (int r = 0; r < kThree; ++r) ASSERT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess) << "rank " << r;
  for (int r = 0; r < kThree; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  size_t braids = 0;
  const std::vector<fakecuda::Violation> seen = fakecuda::violations();
  for (size_t i = violationsBefore; i < seen.size(); ++i) braids += !seen[i].expected;
  EXPECT_EQ(braids, 0u) << "braid made a synchronising call (a pageable copy, say) while rank 1's kernel waited";
  std::vector<float> got(kCount);
  ASSERT_EQ(cudaMemcpy(got.data(), recv[1], kCount * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got.front(), 3.0f);
  EXPECT_EQ(got.back(), 3.0f);
  for (int r = 0; r < kThree; ++r) {
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
    cudaFree(send[r]);
    cudaFree(recv[r]);
    cudaStreamDestroy(streams[r]);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, ThreadRanks, testing::Values("staged", "kernels"),
                         [](const testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

}  // namespace
