// Device calls larger than the staging reserve's blocks, on the staged path
// with a thread per rank: each call passes through pinned memory in pieces
// (column ranges of its rows, src/engine/device/stage_span.h) that cycle
// through blocks made at communicator creation. Every collective, in place
// and not, queued on each rank's stream without a sync: the results must be
// exact, no pinned memory may be allocated after creation, and (the recorder)
// braid makes no synchronising CUDA call while one of its kernels waits.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "fakecuda.h"

namespace {

constexpr int kRanks = 4;
// Per rank and row, int32: 1.5 MiB, several pieces of every collective, and
// not a multiple of any piece.
constexpr size_t kCount = 3 * 131072 + 77;

int32_t valueOf(int rank, size_t i) { return int32_t(rank * 1000003 + int64_t(i % 3000017)); }

// One call of the test: its buffers (device), what it does, what it must give.
struct Call {
  std::string name;
  size_t sendElems = 0, recvElems = 0;
  bool inPlace = false;  // sendbuff lies in recvbuff at sendOffset elements
  size_t sendOffset = 0;
  std::function<ncclResult_t(const void*, void*, ncclComm_t, cudaStream_t)> run;
  std::function<int32_t(size_t)> expected;  // element of recvbuff; empty: nothing to check
};

std::vector<Call> callsOf(int r) {
  const size_t n = kCount, all = kCount * kRanks;
  auto sumAt = [](size_t i) {
    int32_t s = 0;
    for (int q = 0; q < kRanks; ++q) s += valueOf(q, i);
    return s;
  };
  std::vector<Call> calls;
  calls.push_back({"allreduce", n, n, false, 0,
                   [](const void* s, void* d, ncclComm_t c, cudaStream_t st) {
                     return ncclAllReduce(s, d, kCount, ncclInt32, ncclSum, c, st);
                   },
                   sumAt});
  calls.push_back({"allreduce in place", n, n, true, 0,
                   [](const void* s, void* d, ncclComm_t c, cudaStream_t st) {
                     return ncclAllReduce(s, d, kCount, ncclInt32, ncclSum, c, st);
                   },
                   sumAt});
  auto gathered = [](size_t i) { return valueOf(int(i / kCount), i % kCount); };
  calls.push_back({"allgather", n, all, false, 0,
                   [](const void* s, void* d, ncclComm_t c, cudaStream_t st) {
                     return ncclAllGather(s, d, kCount, ncclInt32, c, st);
                   },
                   gathered});
  calls.push_back({"allgather in place", n, all, true, size_t(r) * n,
                   [](const void* s, void* d, ncclComm_t c, cudaStream_t st) {
                     return ncclAllGather(s, d, kCount, ncclInt32, c, st);
                   },
                   gathered});
  calls.push_back({"reducescatter", all, n, false, 0,
                   [](const void* s, void* d, ncclComm_t c, cudaStream_t st) {
                     return ncclReduceScatter(s, d, kCount, ncclInt32, ncclSum, c, st);
                   },
                   [=](size_t i) { return sumAt(size_t(r) * kCount + i); }});
  calls.push_back({"alltoall", all, all, false, 0,
                   [](const void* s, void* d, ncclComm_t c, cudaStream_t st) {
                     return ncclAlltoAll(s, d, kCount, ncclInt32, c, st);
                   },
                   [=](size_t i) { return valueOf(int(i / kCount), size_t(r) * kCount + i % kCount); }});
  calls.push_back({"broadcast in place", n, n, true, 0,
                   [](const void* s, void* d, ncclComm_t c, cudaStream_t st) {
                     return ncclBroadcast(s, d, kCount, ncclInt32, 1, c, st);
                   },
                   [](size_t i) { return valueOf(1, i); }});
  calls.push_back({"reduce", n, n, false, 0,
                   [](const void* s, void* d, ncclComm_t c, cudaStream_t st) {
                     return ncclReduce(s, d, kCount, ncclInt32, ncclSum, 2, c, st);
                   },
                   r == 2 ? std::function<int32_t(size_t)>(sumAt) : nullptr});
  calls.push_back({"gather", n, all, false, 0,
                   [](const void* s, void* d, ncclComm_t c, cudaStream_t st) {
                     return ncclGather(s, d, kCount, ncclInt32, 3, c, st);
                   },
                   r == 3 ? std::function<int32_t(size_t)>(gathered) : nullptr});
  calls.push_back({"scatter", all, n, false, 0,
                   [](const void* s, void* d, ncclComm_t c, cudaStream_t st) {
                     return ncclScatter(s, d, kCount, ncclInt32, 0, c, st);
                   },
                   [=](size_t i) { return valueOf(0, size_t(r) * kCount + i); }});
  calls.push_back({"send and receive in a ring", n, n, false, 0,
                   [r](const void* s, void* d, ncclComm_t c, cudaStream_t st) {
                     ncclGroupStart();
                     ncclSend(s, kCount, ncclInt32, (r + 1) % kRanks, c, st);
                     ncclRecv(d, kCount, ncclInt32, (r + kRanks - 1) % kRanks, c, st);
                     return ncclGroupEnd();
                   },
                   [r](size_t i) { return valueOf((r + kRanks - 1) % kRanks, i); }});
  return calls;
}

// A rank's buffers of one call: the receive buffer, and the send buffer (in
// it, in place) holding valueOf(rank, element of the send buffer).
struct Buffers {
  int32_t* recv = nullptr;
  int32_t* send = nullptr;
  int32_t* ownSend = nullptr;  // out of place
};

TEST(StagedPieces, LargeCallsOfEveryCollectiveFromAThreadPerRankAllocateNoPinnedMemory) {
  setenv("BRAID_DEVICE_ENGINE", "staged", 1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ncclComm_t comms[kRanks] = {};
  int devs[kRanks] = {};
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
  unsetenv("BRAID_DEVICE_ENGINE");

  // The application's allocations first.
  std::vector<std::vector<Call>> calls(kRanks);
  std::vector<std::vector<Buffers>> bufs(kRanks);
  std::vector<cudaStream_t> streams(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    calls[r] = callsOf(r);
    for (const Call& c : calls[r]) {
      Buffers b;
      ASSERT_EQ(cudaMalloc(&b.recv, c.recvElems * sizeof(int32_t)), cudaSuccess);
      if (c.inPlace) {
        b.send = b.recv + c.sendOffset;
      } else {
        ASSERT_EQ(cudaMalloc(&b.ownSend, c.sendElems * sizeof(int32_t)), cudaSuccess);
        b.send = b.ownSend;
      }
      std::vector<int32_t> init(c.sendElems);
      for (size_t i = 0; i < init.size(); ++i) init[i] = valueOf(r, i);
      ASSERT_EQ(cudaMemcpy(b.send, init.data(), init.size() * sizeof(int32_t), cudaMemcpyHostToDevice), cudaSuccess);
      bufs[r].push_back(b);
    }
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const uint64_t pinnedBefore = fakecuda::pinnedAllocations();

  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      if (cudaSetDevice(0) != cudaSuccess) return void(errors[r] = "cudaSetDevice");
      for (size_t k = 0; k < calls[r].size(); ++k)
        if (calls[r][k].run(bufs[r][k].send, bufs[r][k].recv, comms[r], streams[r]) != ncclSuccess)
          return void(errors[r] = calls[r][k].name + ": " + ncclGetLastError(comms[r]));
      if (cudaStreamSynchronize(streams[r]) != cudaSuccess) errors[r] = "cudaStreamSynchronize";
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(fakecuda::pinnedAllocations(), pinnedBefore) << "staged calls allocated pinned memory";

  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    for (size_t k = 0; k < calls[r].size(); ++k) {
      const Call& c = calls[r][k];
      if (!c.expected) continue;
      std::vector<int32_t> got(c.recvElems);
      ASSERT_EQ(cudaMemcpy(got.data(), bufs[r][k].recv, got.size() * sizeof(int32_t), cudaMemcpyDeviceToHost),
                cudaSuccess);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(got[i], c.expected(i)) << c.name << ", rank " << r << ", element " << i;
    }
  }
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
    for (const Buffers& b : bufs[r]) {
      cudaFree(b.recv);
      if (b.ownSend) cudaFree(b.ownSend);
    }
    cudaStreamDestroy(streams[r]);
  }
}

}  // namespace
