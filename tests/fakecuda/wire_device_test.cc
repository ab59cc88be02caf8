// Wire types on device buffers, one thread driving every rank under the fake
// runtime, on both device engines: staged, the host codes the messages; as
// plan kernels, the lanes code them (kernels/executor/wire_step.h, the same
// loops in a block; here blocks of two threads, each a share of the groups).
// Every rank gets the same bits, within the bound, and most values show
// fp8's rounding: through the cost model's plan, and through recursive
// doubling (3 ranks: a core pair and a folded rank), whose partners keep
// what they send. (Not the host buffers' bits: the engines may cut the call
// into other pieces, and a wire type's rounding depends on the pieces.)
// tests/gpu builds the same file for a real GPU (BRAID_WIRE_DEVICE_ON_GPU:
// the device's own codec loops; no fake to ask which engine ran).
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>
// braid.h after nccl.h: its extensions take NCCL's types.
#include <braid.h>

#include "gpu_env.h"
#if !defined(BRAID_WIRE_DEVICE_ON_GPU)
#include "fakecuda.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace {

constexpr int kRanks = 3;
constexpr size_t kCount = 4099;

std::vector<float> contribution(int rank, size_t n) {
  std::mt19937 rng(91u + unsigned(rank));
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(1.0f + float(rng() % 1000) / 1000.0f, int(rng() % 21) - 30) * (rng() % 2 ? 1 : -1);
  return v;
}

// The device engine, and NCCL_ALGO (empty: the cost model's choice).
using EngineAndAlgorithm = std::tuple<const char*, const char*>;
class WireDevice : public testing::TestWithParam<EngineAndAlgorithm> {};

TEST_P(WireDevice, SameBitsOnEveryRankWithinTheBound) {
  GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonHere());
  const std::string engine = std::get<0>(GetParam()), algo = std::get<1>(GetParam());
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ncclComm_t comms[kRanks] = {};
  int devs[kRanks] = {};
  setenv("BRAID_DEVICE_ENGINE", engine.c_str(), 1);
  if (!algo.empty()) setenv("NCCL_ALGO", algo.c_str(), 1);
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
  unsetenv("BRAID_DEVICE_ENGINE");
  unsetenv("NCCL_ALGO");
  for (ncclComm_t c : comms) ASSERT_EQ(braidCommSetWireType(c, ncclFloat8e4m3), ncclSuccess);
  // One thread drives every rank in one group, as the device collectives'
  // tests do: as plan kernels, one kernel (a ring: no peer access under a
  // wire type).
  cudaStream_t streams[kRanks] = {};
  float* bufs[kRanks] = {};
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&bufs[r], kCount * sizeof(float)), cudaSuccess);
    const std::vector<float> mine = contribution(r, kCount);
    ASSERT_EQ(cudaMemcpy(bufs[r], mine.data(), kCount * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclAllReduce(bufs[r], bufs[r], kCount, ncclFloat32, ncclSum, comms[r], streams[r]), ncclSuccess);
#if !defined(BRAID_WIRE_DEVICE_ON_GPU)
  (void)fakecuda::takeMostPlanLanes();
#endif
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<float>> onDevice(kRanks, std::vector<float>(kCount));
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess) << "rank " << r;
    ncclResult_t async = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comms[r], &async), ncclSuccess);
    ASSERT_EQ(async, ncclSuccess) << "rank " << r << ": " << ncclGetLastError(comms[r]);
    ASSERT_EQ(cudaMemcpy(onDevice[r].data(), bufs[r], kCount * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(bufs[r]);
    cudaStreamDestroy(streams[r]);
  }
#if !defined(BRAID_WIRE_DEVICE_ON_GPU)
  // The engine under test ran the call: a plan kernel's lanes, or none.
  if (engine == "kernels")
    EXPECT_GT(fakecuda::takeMostPlanLanes(), 0u);
  else
    EXPECT_EQ(fakecuda::takeMostPlanLanes(), 0u);
#endif
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(std::memcmp(onDevice[r].data(), onDevice[0].data(), kCount * sizeof(float)), 0) << "rank " << r;
  // Within the bound of wire_format.h for three narrowings of e4m3 (u = 2^-4,
  // q = 2^-9 / 448 of the largest sum within a group's reach).
  const std::vector<float> a = contribution(0, kCount), b = contribution(1, kCount), c = contribution(2, kCount);
  std::vector<double> scale(kCount);
  for (size_t i = 0; i < kCount; ++i) scale[i] = std::fabs(a[i]) + std::fabs(b[i]) + std::fabs(c[i]);
  size_t rounded = 0;
  for (size_t i = 0; i < kCount; ++i) {
    double window = 0;
    for (size_t j = i >= 31 ? i - 31 : 0; j < std::min(kCount, i + 32); ++j) window = std::max(window, scale[j]);
    const double exact = double(a[i]) + double(b[i]) + double(c[i]);
    const double bound = 4 * (std::ldexp(scale[i], -4) + std::ldexp(window, -9) / 448) * 1.3;
    ASSERT_LE(std::fabs(onDevice[0][i] - exact), bound) << "element " << i;
    if (std::fabs(onDevice[0][i] - exact) > std::ldexp(scale[i], -12)) ++rounded;
  }
  // fp8 rounds most sums far past float's rounding: the wire type was in effect.
  EXPECT_GT(rounded, kCount / 2);
  for (ncclComm_t c : comms) ncclCommDestroy(c);
}

INSTANTIATE_TEST_SUITE_P(Engines, WireDevice,
                         testing::Combine(testing::Values("staged", "kernels"),
                                          testing::Values("", "recursivedoubling")),
                         [](const testing::TestParamInfo<EngineAndAlgorithm>& p) {
                           const std::string algo = std::get<1>(p.param);
                           return std::string(std::get<0>(p.param)) + (algo.empty() ? "" : "_" + algo);
                         });

}  // namespace
