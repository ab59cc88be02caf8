// The plan kernel's lane code with several threads per lane (emulated CUDA
// blocks, thread_block.h), on the CPU: every schedule against the reference's
// arithmetic, bit for bit, and a lane that fails ending every lane it runs
// with. Built twice, the second time under ThreadSanitizer, which reports any
// access of a lane's threads that no barrier or atomic orders.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/kernels/exec_harness.h"

namespace exectest {
namespace {

using braid::schedule::Algorithm;
using braid::schedule::Collective;
using braid::executor::ExecStatus;
using braid::executor::Protocol;

class BlockSchedules : public ::testing::TestWithParam<CollAlgo> {};

// 2, 3 and 5 ranks; 2 and 3 threads per lane (3 leaves a partial stride at
// every count); both protocols; float32 sum and int8 max.
TEST_P(BlockSchedules, MatchReferenceWithThreadsPerLane) {
  const CollAlgo ca = GetParam();
  for (int p : {2, 3, 5}) {
    for (uint32_t threads : {2u, 3u}) {
      for (Protocol proto : {Protocol::Bulk, Protocol::LL}) {
        CollCase c;
        c.coll = ca.coll;
        c.algorithm = ca.algorithm;
        c.nranks = p;
        c.count = 97;
        c.chunkElems = 13;
        c.nchannels = 1 + p % 2;
        c.root = p - 1;
        c.type = threads == 2 ? ncclFloat32 : ncclInt8;
        c.op = c.type == ncclInt8 ? ncclMax : ncclSum;
        RunConfig cfg;
        cfg.protocol = proto;
        cfg.threadsPerLane = threads;
        cfg.shareFailure = true;
        EXPECT_EQ(runAndCompare(c, cfg, uint64_t(p) * 100 + threads), "")
            << p << " ranks, " << threads << " threads per lane, " << (proto == Protocol::LL ? "LL" : "bulk");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllSchedules, BlockSchedules, ::testing::ValuesIn(everySchedule()),
                         [](const ::testing::TestParamInfo<CollAlgo>& info) { return scheduleName(info.param); });

// A ring allreduce of 4 ranks whose lane `failLane` fails at its first step:
// the lanes that wait for it, directly or through others, must end.
CollCase ringOfFour() {
  CollCase c;
  c.coll = Collective::AllReduce;
  c.algorithm = Algorithm::Ring;
  c.nranks = 4;
  c.count = 400;
  c.chunkElems = 25;
  return c;
}

// A lane that fails raises the launch's failure word; every other lane's
// waits end on it (Aborted), none waits until its poll bound, and the word
// holds the failure.
TEST(BlockFailure, AFailingLaneEndsEveryLaneOfItsLaunch) {
  const CollCase c = ringOfFour();
  for (int failLane : {0, 2}) {
    auto plans = makePlans(c);
    auto data = makeData(c, plans, 5);
    RunConfig cfg;
    cfg.threadsPerLane = 2;
    cfg.shareFailure = true;
    cfg.failLane = failLane;
    cfg.maxPolls = uint64_t(1) << 40;  // never reached: only the failure word ends the waits
    uint32_t failure = 0;
    cfg.failureWord = &failure;
    std::vector<ExecStatus> statuses;
    runInterpreter(c, cfg, plans, &data, &statuses);
    ASSERT_EQ(statuses.size(), 4u);
    EXPECT_EQ(statuses[size_t(failLane)], ExecStatus::BadStep);
    EXPECT_EQ(failure, uint32_t(ExecStatus::BadStep));
    int aborted = 0;
    for (size_t i = 0; i < statuses.size(); ++i) {
      if (int(i) == failLane) continue;
      EXPECT_TRUE(statuses[i] == ExecStatus::Ok || statuses[i] == ExecStatus::Aborted)
          << "lane " << i << ": " << braid::executor::execStatusName(statuses[i]);
      aborted += statuses[i] == ExecStatus::Aborted;
    }
    EXPECT_GT(aborted, 0) << "some lane waits for the failed one";
  }
}

// Without the shared word the same failure leaves the other lanes waiting
// until their poll bound: the test above would hang, not pass.
TEST(BlockFailure, WithoutTheWordThePeersWaitOn) {
  const CollCase c = ringOfFour();
  auto plans = makePlans(c);
  auto data = makeData(c, plans, 5);
  RunConfig cfg;
  cfg.threadsPerLane = 2;
  cfg.failLane = 0;
  cfg.maxPolls = uint64_t(1) << 14;
  std::vector<ExecStatus> statuses;
  runInterpreter(c, cfg, plans, &data, &statuses);
  int timedOut = 0;
  for (ExecStatus s : statuses) timedOut += s == ExecStatus::TimedOut;
  EXPECT_GT(timedOut, 0);
}

// The emulation's self-test, run only by tests/emulation/tsan_catches_races.sh
// on the ThreadSanitizer build: blocks whose barriers do nothing must be
// reported as a data race (a step's threads read what others still write).
TEST(BlockEmulationSelfTest, DISABLED_BlocksWithoutBarriersRace) {
  CollCase c = ringOfFour();
  c.coll = Collective::AllReduce;
  c.algorithm = Algorithm::Tree;
  c.nranks = 5;
  RunConfig cfg;
  cfg.threadsPerLane = 4;
  cfg.brokenBarriers = true;
  cfg.maxPolls = uint64_t(1) << 20;
  auto plans = makePlans(c);
  auto data = makeData(c, plans, 3);
  runInterpreter(c, cfg, plans, &data);
}

}  // namespace
}  // namespace exectest
