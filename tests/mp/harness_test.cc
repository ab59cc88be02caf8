// Tests of the fork harness itself (tests/common/mp_harness.h). The bodies do
// not call NCCL, so these run even while the library is incomplete.
#include "common/mp_harness.h"

#include <gtest/gtest-spi.h>

#include <csignal>
#include <cstdlib>
#include <cstring>

namespace {

using mptest::IdSource;
using mptest::RankOptions;
using mptest::RankOutcome;
using mptest::runRanksReport;

RankOptions noNccl() {
  RankOptions o;
  o.idSource = IdSource::None;
  o.timeoutSeconds = 20;
  o.failGraceSeconds = 1;
  return o;
}

TEST(MpHarness, EveryRankRunsOnceWithItsRankAndEnvironment) {
  constexpr int kRanks = 5;
  // The children tick their own counter in a page they share with this process.
  mptest::detail::SharedMapping marks(sizeof(int) * 2 * kRanks);
  ASSERT_NE(marks.get(), nullptr);
  int* seen = static_cast<int*>(marks.get());
  RankOptions opts = noNccl();
  opts.env = {{"MPTEST_HARNESS_VALUE", "42"}};
  const auto report = runRanksReport(
      kRanks,
      [seen](int rank, int nranks, const ncclUniqueId&) {
        MP_CHECK(nranks == kRanks, "nranks %d", nranks);
        const char* v = std::getenv("MPTEST_HARNESS_VALUE");
        MP_CHECK(v && std::strcmp(v, "42") == 0, "env not set in the child");
        __atomic_add_fetch(&seen[rank], 1, __ATOMIC_SEQ_CST);
        seen[kRanks + rank] = static_cast<int>(getpid());
      },
      opts);
  EXPECT_TRUE(report.ok()) << report.summary();
  ASSERT_EQ(report.ranks.size(), static_cast<size_t>(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(seen[r], 1) << "rank " << r;
    EXPECT_NE(seen[kRanks + r], static_cast<int>(getpid())) << "rank " << r << " ran in the test process";
    for (int k = 0; k < r; ++k) EXPECT_NE(seen[kRanks + r], seen[kRanks + k]);
  }
  EXPECT_EQ(std::getenv("MPTEST_HARNESS_VALUE"), nullptr) << "the child's environment leaked into the parent";
}

TEST(MpHarness, FailedExpectationIsReportedWithItsMessageAndOthersSucceed) {
  const auto report = runRanksReport(
      3,
      [](int rank, int, const ncclUniqueId&) {
        MP_EXPECT(rank != 1, "value %d is wrong", 1234);
        MP_EXPECT(rank != 1, "second problem");
      },
      noNccl());
  ASSERT_EQ(report.ranks.size(), 3u);
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(report.ranks[0].kind, RankOutcome::kOk);
  EXPECT_EQ(report.ranks[2].kind, RankOutcome::kOk);
  EXPECT_EQ(report.ranks[1].kind, RankOutcome::kFailed);
  EXPECT_NE(report.ranks[1].messages.find("value 1234 is wrong"), std::string::npos)
      << report.ranks[1].messages;
  EXPECT_NE(report.ranks[1].messages.find("second problem"), std::string::npos);
  EXPECT_NE(report.ranks[1].messages.find("[rank 1 "), std::string::npos);
  EXPECT_NE(report.summary().find("rank 1: FAILED"), std::string::npos) << report.summary();
}

TEST(MpHarness, CrashIsReportedWithItsSignal) {
  const auto report = runRanksReport(
      2,
      [](int rank, int, const ncclUniqueId&) {
        if (rank == 0) std::raise(SIGSEGV);
      },
      noNccl());
  ASSERT_EQ(report.ranks.size(), 2u);
  EXPECT_EQ(report.ranks[0].kind, RankOutcome::kCrashed);
  EXPECT_EQ(report.ranks[0].detail, SIGSEGV);
  EXPECT_EQ(report.ranks[1].kind, RankOutcome::kOk);
}

TEST(MpHarness, HungRankIsKilledAtTheTimeoutAndNamesItsLastStep) {
  RankOptions opts = noNccl();
  opts.timeoutSeconds = 1;
  const auto report = runRanksReport(
      2,
      [](int rank, int, const ncclUniqueId&) {
        mptest::progress("waiting for godot on rank %d", rank);
        if (rank == 1)
          for (;;) pause();
      },
      opts);
  ASSERT_EQ(report.ranks.size(), 2u);
  EXPECT_EQ(report.ranks[0].kind, RankOutcome::kOk);
  EXPECT_EQ(report.ranks[1].kind, RankOutcome::kTimedOut);
  EXPECT_EQ(report.ranks[1].lastStep, "waiting for godot on rank 1");
  EXPECT_LT(report.seconds, 10.0);
  EXPECT_NE(report.summary().find("HUNG"), std::string::npos);
}

TEST(MpHarness, PeersOfAFailedRankAreKilledAfterTheGracePeriod) {
  RankOptions opts = noNccl();
  opts.timeoutSeconds = 60;
  opts.failGraceSeconds = 1;
  const auto report = runRanksReport(
      3,
      [](int rank, int, const ncclUniqueId&) {
        if (rank == 2) MP_CHECK(false, "rank %d gives up", rank);
        for (;;) pause();  // a peer blocked on the failed rank
      },
      opts);
  ASSERT_EQ(report.ranks.size(), 3u);
  EXPECT_EQ(report.ranks[2].kind, RankOutcome::kFailed);
  EXPECT_NE(report.ranks[2].messages.find("rank 2 gives up"), std::string::npos);
  EXPECT_EQ(report.ranks[0].kind, RankOutcome::kKilledAfterPeerFailure);
  EXPECT_EQ(report.ranks[1].kind, RankOutcome::kKilledAfterPeerFailure);
  EXPECT_LT(report.seconds, 20.0);
}

TEST(MpHarness, ExceptionInBodyFailsTheRank) {
  const auto report = runRanksReport(
      1, [](int, int, const ncclUniqueId&) { throw std::runtime_error("boom"); }, noNccl());
  ASSERT_EQ(report.ranks.size(), 1u);
  EXPECT_EQ(report.ranks[0].kind, RankOutcome::kFailed);
  EXPECT_NE(report.ranks[0].messages.find("boom"), std::string::npos);
}

TEST(MpHarness, RunRanksTurnsAFailureIntoAGoogleTestFailure) {
  EXPECT_NONFATAL_FAILURE(
      mptest::runRanks(
          2, [](int rank, int, const ncclUniqueId&) { MP_EXPECT(rank == 0, "rank %d is odd", rank); },
          noNccl()),
      "rank 1 is odd");
  mptest::runRanks(2, [](int, int, const ncclUniqueId&) {}, noNccl());  // and a success is silent
}

}  // namespace
