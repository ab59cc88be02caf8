// Recovery without restarting the job: after a rank dies, the survivors revoke
// the failed communicator, shrink it to exclude the dead rank (without waiting
// on it) and go on computing correct collectives on the new one.
#include <nccl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/mp_harness.h"
#include "common/mp_nccl.h"

namespace {

constexpr int kRanks = 4;
constexpr int kVictim = 1;

class MpShrink : public ::testing::TestWithParam<std::string> {};

TEST_P(MpShrink, SurvivorsShrinkAroundADeadRankAndKeepComputing) {
  mptest::RankOptions opts = mptest::transportOptions(GetParam(), 120);
  opts.env.push_back({"BRAID_TIMEOUT", "60"});
  opts.failGraceSeconds = 60;
  const mptest::RunReport report = mptest::runRanksReport(
      kRanks,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        std::vector<float> a(1 << 16, 1.0f), b(1 << 16);
        MP_NCCL_CHECK(ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat32, ncclSum, comm, nullptr));
        if (rank == kVictim) kill(getpid(), SIGKILL);
        // The survivors find out in their next collective.
        const ncclResult_t failed = ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat32, ncclSum, comm, nullptr);
        MP_CHECK(failed == ncclRemoteError || failed == ncclSystemError, "rank %d: got %d after the loss", rank,
                 static_cast<int>(failed));
        MP_NCCL_CHECK(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT));
        MP_CHECK(ncclAllReduce(a.data(), b.data(), 4, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess,
                 "a revoked communicator still runs collectives");
        int dead[] = {kVictim};
        ncclComm_t small = nullptr;
        const auto start = std::chrono::steady_clock::now();
        MP_NCCL_CHECK(ncclCommShrink(comm, dead, 1, &small, nullptr, NCCL_SHRINK_DEFAULT));
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        MP_EXPECT(took < 10.0, "rank %d: ncclCommShrink took %.1f s", rank, took);
        int n = 0, me = -1;
        MP_NCCL_CHECK(ncclCommCount(small, &n));
        MP_NCCL_CHECK(ncclCommUserRank(small, &me));
        const int want = rank < kVictim ? rank : rank - 1;
        MP_CHECK(n == kRanks - 1 && me == want, "rank %d: shrunk comm has %d ranks, my rank %d (want %d of %d)", rank,
                 n, me, want, kRanks - 1);
        for (int round = 0; round < 5; ++round) {
          for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(rank * 10 + round + (i % 7));
          MP_NCCL_CHECK(ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat32, ncclSum, small, nullptr));
          for (size_t i = 0; i < a.size(); ++i) {
            float expect = 0;
            for (int r = 0; r < kRanks; ++r)
              if (r != kVictim) expect += static_cast<float>(r * 10 + round + (i % 7));
            if (b[i] != expect) {
              mptest::expectFailed(__FILE__, __LINE__, "rank %d round %d: element %zu is %g, want %g", rank, round, i,
                                   b[i], expect);
              break;
            }
          }
        }
        MP_NCCL_CHECK(ncclCommDestroy(small));
        MP_NCCL_CHECK(ncclCommAbort(comm));
      },
      opts);
  ASSERT_TRUE(report.setupError.empty()) << report.setupError;
  for (const mptest::RankOutcome& o : report.ranks) {
    if (o.rank == kVictim)
      EXPECT_EQ(o.kind, mptest::RankOutcome::kCrashed) << report.summary();
    else
      EXPECT_EQ(o.kind, mptest::RankOutcome::kOk) << report.summary();
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, MpShrink, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// NCCL_SHRINK_ABORT on a healthy communicator: the survivors get a working
// child, and the parent's operations are stopped for good.
TEST(MpShrinkAbort, ChildWorksAndTheParentIsStopped) {
  mptest::runRanks(
      3,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        std::vector<float> a(256, 1.0f), b(256);
        MP_NCCL_CHECK(ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat32, ncclSum, comm, nullptr));
        if (rank == 2) {  // excluded: it does not take part in the shrink
          MP_NCCL_CHECK(ncclCommDestroy(comm));
          return;
        }
        int excluded[] = {2};
        ncclComm_t small = nullptr;
        MP_NCCL_CHECK(ncclCommShrink(comm, excluded, 1, &small, nullptr, NCCL_SHRINK_ABORT));
        MP_NCCL_CHECK(ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat32, ncclSum, small, nullptr));
        MP_CHECK(b[0] == 2.0f, "rank %d: the shrunk communicator summed %g, want 2", rank, b[0]);
        MP_CHECK(ncclAllReduce(a.data(), b.data(), 4, ncclFloat32, ncclSum, comm, nullptr) != ncclSuccess,
                 "rank %d: the parent still runs collectives after NCCL_SHRINK_ABORT", rank);
        const std::string why = ncclGetLastError(comm);
        MP_CHECK(why.find("aborted") != std::string::npos, "rank %d: the parent failed for another reason: %s", rank,
                 why.c_str());
        MP_NCCL_CHECK(ncclCommDestroy(small));
        MP_NCCL_CHECK(ncclCommAbort(comm));
      },
      mptest::transportOptions("shm", 60));
}

}  // namespace
