// Collectives on device buffers with ranks as forked processes (shm between
// them) sharing one GPU. This process never initialises CUDA: it asks a forked
// probe whether there is a GPU, and only the rank processes use CUDA.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "common/mp_harness.h"
#include "device_cases.h"
#include "gpu_env.h"

namespace {

class DeviceCollectivesForked : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override { GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonForked()); }
};

TEST_P(DeviceCollectivesForked, MatchTheHostReference) {
  mptest::RankOptions opts;
  opts.timeoutSeconds = 600;
  mptest::runRanks(GetParam(), [](int rank, int nranks, const ncclUniqueId& id) {
    MP_EXPECT(cudaSetDevice(0) == cudaSuccess, "cudaSetDevice(0) failed");
    cudaStream_t stream = nullptr;
    MP_EXPECT(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "cudaStreamCreate failed");
    ncclComm_t comm = nullptr;
    MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
    devcase::Runner runner({{comm, rank, stream}}, nranks,
                           [](const std::string& m) { MP_EXPECT(false, "%s", m.c_str()); });
    for (const devcase::Case& c : devcase::allCases(nranks, 1031)) {
      mptest::progress("%s", devcase::describe(c).c_str());
      if (!runner.run(c) || runner.failures() >= 20) break;
    }
    devcase::Case large;
    large.count = (size_t(1) << 20) + 3;
    for (bool inPlace : {false, true}) {
      large.inPlace = inPlace;
      if (!runner.run(large)) break;
    }
    MP_NCCL_CHECK(ncclCommDestroy(comm));
    cudaStreamDestroy(stream);
  }, opts);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DeviceCollectivesForked, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& p) { return std::to_string(p.param) + "ranks"; });

}  // namespace
