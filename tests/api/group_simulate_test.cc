// ncclGroupSimulateEnd: the group ends, its collectives are estimated by the
// cost model and dropped, never run.
#include <gtest/gtest.h>
#include <nccl.h>

#include <vector>

namespace {

class GroupSimulate : public ::testing::Test {
 protected:
  void SetUp() override {
    comms_.resize(2);
    ASSERT_EQ(ncclCommInitAll(comms_.data(), 2, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  }
  void TearDown() override {
    for (ncclComm_t c : comms_)
      if (c) ncclCommDestroy(c);
  }
  // Simulates an all-reduce of `count` floats on both ranks; returns its estimate.
  float simulateAllReduce(size_t count, std::vector<float>* out) {
    std::vector<float> in(count, 1.0f);
    out->assign(2 * count, -7.0f);
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(ncclAllReduce(in.data(), out->data() + r * count, count, ncclFloat, ncclSum, comms_[r], nullptr),
                ncclSuccess);
    EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess) << ncclGetLastError(nullptr);
    return sim.estimatedTime;
  }
  std::vector<ncclComm_t> comms_;
};

TEST_F(GroupSimulate, EstimatesWithoutRunning) {
  std::vector<float> out;
  const float small = simulateAllReduce(16, &out);
  EXPECT_GT(small, 0.0f);
  for (float v : out) ASSERT_EQ(v, -7.0f) << "a simulated collective wrote its output";
  const float large = simulateAllReduce(1 << 20, &out);
  EXPECT_GT(large, small) << "4 MiB estimated no slower than 64 B";
  for (float v : out) ASSERT_EQ(v, -7.0f) << "a simulated collective wrote its output";
}

TEST_F(GroupSimulate, LeavesTheGroupAndTheCommunicatorsUsable) {
  std::vector<float> out;
  simulateAllReduce(1000, &out);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "still inside a group after ncclGroupSimulateEnd";
  std::vector<float> in(1000, 2.0f);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclAllReduce(in.data(), out.data() + r * 1000, 1000, ncclFloat, ncclSum, comms_[r], nullptr),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (float v : out) ASSERT_EQ(v, 4.0f);
}

TEST_F(GroupSimulate, UninitialisedInfoIsRefusedAndEndsTheGroup) {
  ncclSimInfo_t sim{};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclInvalidArgument);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("NCCL_SIM_INFO_INITIALIZER"), std::string::npos);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage) << "the bad call left the group open";
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclGroupSimulateEnd(nullptr), ncclInvalidArgument);
}

TEST(GroupSimulateUsage, WithoutGroupStartIsInvalidUsage) {
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclInvalidUsage);
}

}  // namespace
