// Tests of the thread-rank harness itself (tests/threads/thread_ranks.h).
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "threads/thread_ranks.h"

namespace {

using threadtest::runThreadRanks;
using threadtest::ThreadOptions;

TEST(ThreadHarness, EveryRankRunsOnceInItsOwnThreadWithItsCommunicator) {
  constexpr int kRanks = 5;
  std::vector<std::atomic<int>> seen(kRanks);
  std::vector<std::thread::id> ids(kRanks);
  ThreadOptions o;
  o.env = {{"THREADTEST_VALUE", "42"}};
  runThreadRanks(
      kRanks,
      [&](ncclComm_t comm, int rank, int nranks) {
        TR_CHECK(nranks == kRanks, "nranks %d", nranks);
        int count = -1, me = -1;
        TR_NCCL_CHECK(ncclCommCount(comm, &count));
        TR_NCCL_CHECK(ncclCommUserRank(comm, &me));
        TR_EXPECT(count == kRanks && me == rank, "comm says rank %d of %d", me, count);
        const char* v = std::getenv("THREADTEST_VALUE");
        TR_EXPECT(v && std::strcmp(v, "42") == 0, "environment not applied");
        seen[rank]++;
        ids[rank] = std::this_thread::get_id();
      },
      o);
  EXPECT_EQ(std::getenv("THREADTEST_VALUE"), nullptr) << "the environment was not restored";
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(seen[r].load(), 1) << "rank " << r;
    EXPECT_NE(ids[r], std::this_thread::get_id()) << "rank " << r << " ran in the test thread";
    for (int k = 0; k < r; ++k) EXPECT_NE(ids[r], ids[k]);
  }
}

TEST(ThreadHarness, EnvironmentIsRestoredToItsPreviousValue) {
  setenv("THREADTEST_OLD", "before", 1);
  ThreadOptions o;
  o.env = {{"THREADTEST_OLD", "during"}};
  runThreadRanks(
      2,
      [](ncclComm_t, int, int) {
        TR_EXPECT(std::strcmp(std::getenv("THREADTEST_OLD"), "during") == 0, "not applied");
      },
      o);
  ASSERT_NE(std::getenv("THREADTEST_OLD"), nullptr);
  EXPECT_STREQ(std::getenv("THREADTEST_OLD"), "before");
  unsetenv("THREADTEST_OLD");
}

void failingExpectations() {
  runThreadRanks(3, [](ncclComm_t, int rank, int) {
    TR_EXPECT(rank != 1, "value %d is wrong", 1234);
    TR_EXPECT(rank != 1, "second problem");
  });
}

TEST(ThreadHarness, FailedExpectationNamesTheRankAndItsMessages) {
  EXPECT_NONFATAL_FAILURE(failingExpectations(), "rank 1: finished with failures");
  EXPECT_NONFATAL_FAILURE(failingExpectations(), "value 1234 is wrong");
  EXPECT_NONFATAL_FAILURE(failingExpectations(), "second problem");
}

void fatalCheckInOneRank() {
  runThreadRanks(4, [](ncclComm_t, int rank, int) {
    TR_CHECK(rank != 2, "rank two gives up");
    threadtest::fail("must not be reached by rank 2");
  });
}

TEST(ThreadHarness, FatalCheckLeavesTheBodyAndIsReported) {
  EXPECT_NONFATAL_FAILURE(fatalCheckInOneRank(), "rank 2: stopped by a fatal failure");
  EXPECT_NONFATAL_FAILURE(fatalCheckInOneRank(), "rank two gives up");
}

void failedCollectiveArguments() {
  runThreadRanks(2, [](ncclComm_t comm, int, int) {
    float x = 0;
    TR_NCCL_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, nullptr));
    // An invalid root fails on every rank before anything is sent.
    TR_NCCL_CHECK(ncclBroadcast(&x, &x, 1, ncclFloat32, 7, comm, nullptr));
  });
}

TEST(ThreadHarness, FailingNcclCallIsReportedWithTheLibraryMessage) {
  EXPECT_NONFATAL_FAILURE(failedCollectiveArguments(), "ncclBroadcast(&x, &x, 1, ncclFloat32, 7");
}

void hangingRank() {
  ThreadOptions o;
  o.timeoutSeconds = 1;
  runThreadRanks(
      3,
      [](ncclComm_t, int rank, int) {
        if (rank != 1) return;
        threadtest::progress("waiting for Godot");
        for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      },
      o);
}

TEST(ThreadHarnessDeathTest, HungRankAbortsTheProcessNamingIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(hangingRank(), "1 of 3 rank threads did not finish within the timeout of 1 s.*"
                              "rank 1: HUNG, last step: waiting for Godot");
}

void hangAfterPeerFailed() {
  ThreadOptions o;
  o.timeoutSeconds = 100;
  o.failGraceSeconds = 1;
  runThreadRanks(
      2,
      [](ncclComm_t, int rank, int) {
        TR_CHECK(rank != 0, "rank 0 gives up");
        for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      },
      o);
}

TEST(ThreadHarnessDeathTest, PeersOfAFailedRankGetAGracePeriod) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(hangAfterPeerFailed(), "did not finish after a rank failed.*rank 0 gives up.*"
                                      "rank 1: HUNG");
}

}  // namespace
