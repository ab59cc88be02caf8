// Plan kernels of ranks that one thread drives on one GPU (ncclCommInitAll,
// a group over every rank): the ranks' calls address each other's device
// buffers in place (the PeerAccess algorithm: one PeerReduce step a lane, in
// the launch that joins every rank's stream), on the fake runtime with blocks
// of two threads (the 16-byte vector path) and under the recorder. The
// planner's TUNING log (NCCL_DEBUG_FILE, set by CTest) shows the choice.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace {

constexpr int kRanks = 4;

struct Ranks {
  ncclComm_t comms[kRanks] = {};
  cudaStream_t streams[kRanks] = {};
  Ranks() {
    setenv("BRAID_DEVICE_ENGINE", "kernels", 1);
    EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
    int devs[kRanks] = {};
    EXPECT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
    unsetenv("BRAID_DEVICE_ENGINE");
    for (cudaStream_t& s : streams) EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  }
  ~Ranks() {
    for (int r = 0; r < kRanks; ++r) {
      ncclCommDestroy(comms[r]);
      cudaStreamDestroy(streams[r]);
    }
  }
};

float valueOf(int rank, size_t i) { return float(1 + (i * 7 + size_t(rank) * 3) % 5); }

// The planner's lines so far that name `algorithm` for `collective`.
int choicesLogged(const std::string& collective, const std::string& algorithm) {
  const char* pattern = getenv("NCCL_DEBUG_FILE");
  if (pattern == nullptr) return -1;
  std::string path = pattern;
  const size_t at = path.find("%p");
  if (at != std::string::npos) path.replace(at, 2, std::to_string(getpid()));
  std::ifstream in(path);
  int n = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find(collective + " ") != std::string::npos && line.find(": " + algorithm + "/") != std::string::npos)
      ++n;
  return n;
}

TEST(PeerAccessKernels, AllReduceOfEveryRankFromOneThread) {
  Ranks ranks;
  for (size_t count : {size_t(1), size_t(1001), size_t(600011)})  // 600011 floats: several channels a rank
    for (bool inPlace : {false, true})
      for (ncclRedOp_t op : {ncclSum, ncclAvg, ncclMax}) {
        std::vector<float*> in(kRanks), out(kRanks);
        for (int r = 0; r < kRanks; ++r) {
          ASSERT_EQ(cudaMalloc(&in[r], count * sizeof(float)), cudaSuccess);
          out[r] = in[r];
          if (!inPlace) {
            ASSERT_EQ(cudaMalloc(&out[r], count * sizeof(float)), cudaSuccess);
          }
          std::vector<float> v(count);
          for (size_t i = 0; i < count; ++i) v[i] = valueOf(r, i);
          ASSERT_EQ(cudaMemcpy(in[r], v.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
        }
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        ASSERT_EQ(ncclGroupStart(), ncclSuccess);
        for (int r = 0; r < kRanks; ++r)
          ASSERT_EQ(ncclAllReduce(in[r], out[r], count, ncclFloat32, op, ranks.comms[r], ranks.streams[r]), ncclSuccess)
              << ncclGetLastError(ranks.comms[r]);
        ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
        for (int r = 0; r < kRanks; ++r) {
          ASSERT_EQ(cudaStreamSynchronize(ranks.streams[r]), cudaSuccess);
          std::vector<float> got(count);
          ASSERT_EQ(cudaMemcpy(got.data(), out[r], count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
          for (size_t i = 0; i < count; ++i) {
            float want = 0;
            for (int k = 0; k < kRanks; ++k) want = op == ncclMax ? std::max(want, valueOf(k, i)) : want + valueOf(k, i);
            if (op == ncclAvg) want /= kRanks;
            ASSERT_EQ(got[i], want) << "rank " << r << " element " << i << " of " << count << " op " << int(op)
                                    << (inPlace ? " in place" : "");
          }
        }
        for (int r = 0; r < kRanks; ++r) {
          cudaFree(in[r]);
          if (!inPlace) cudaFree(out[r]);
        }
      }
  const int logged = choicesLogged("AllReduce", "PeerAccess");
  if (logged < 0) GTEST_SKIP() << "no NCCL_DEBUG_FILE: the results are checked, the choice is not";
  EXPECT_EQ(logged, 3 * 2 * 3 * kRanks) << "every rank of every call chose PeerAccess";
}

TEST(PeerAccessKernels, ReduceScatterAndAllGatherFromOneThread) {
  Ranks ranks;
  const size_t count = 70001;
  std::vector<int32_t*> big(kRanks), small(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaMalloc(&big[r], count * kRanks * sizeof(int32_t)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&small[r], count * sizeof(int32_t)), cudaSuccess);
    std::vector<int32_t> v(count * kRanks);
    for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t(r * 100000 + i);
    ASSERT_EQ(cudaMemcpy(big[r], v.data(), v.size() * sizeof(int32_t), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclReduceScatter(big[r], small[r], count, ncclInt32, ncclSum, ranks.comms[r], ranks.streams[r]),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)  // in place: each rank's block of `big` is its sum
    ASSERT_EQ(ncclAllGather(small[r], big[r], count, ncclInt32, ranks.comms[r], ranks.streams[r]), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaStreamSynchronize(ranks.streams[r]), cudaSuccess);
    std::vector<int32_t> got(count * kRanks);
    ASSERT_EQ(cudaMemcpy(got.data(), big[r], got.size() * sizeof(int32_t), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < got.size(); ++i) {
      int32_t want = 0;
      for (int k = 0; k < kRanks; ++k) want += int32_t(k * 100000 + i);
      ASSERT_EQ(got[i], want) << "rank " << r << " element " << i;
    }
    cudaFree(big[r]);
    cudaFree(small[r]);
  }
  if (choicesLogged("ReduceScatter", "PeerAccess") < 0) GTEST_SKIP() << "no NCCL_DEBUG_FILE";
  EXPECT_EQ(choicesLogged("ReduceScatter", "PeerAccess"), kRanks);
  EXPECT_EQ(choicesLogged("AllGather", "PeerAccess"), kRanks);
}

}  // namespace
