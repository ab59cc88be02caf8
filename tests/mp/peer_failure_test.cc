// A rank dies (SIGKILL) in the middle of a run of collectives. Every surviving
// rank must get ncclRemoteError or ncclSystemError naming the lost rank within
// seconds (long before BRAID_TIMEOUT), the communicator must then stay in error
// (later calls fail at once, ncclCommGetAsyncError reports it), and
// ncclCommAbort / ncclCommDestroy must return promptly. Over shared memory (no
// connection to break: the waiting rank notices the process is gone) and TCP
// (the connection breaks); ranks not connected to the dead one hear of it from
// a rank that is (a failure notice over the bootstrap).
#include <nccl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/mp_harness.h"
#include "common/mp_nccl.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRanks = 4;
constexpr int kVictim = 2;
constexpr size_t kCount = 1 << 20;  // 4 MiB per call: the ring is mid-flight when the victim dies
constexpr double kDetectSeconds = 10;  // BRAID_TIMEOUT is 120 below

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

mptest::RankOptions options(const std::string& transport) {
  mptest::RankOptions o = mptest::transportOptions(transport, 120);
  o.env.push_back({"BRAID_TIMEOUT", "120"});
  o.failGraceSeconds = 60;  // the victim "crashes" on purpose; survivors must still finish
  return o;
}

void survive(ncclComm_t comm, int rank) {
  std::vector<float> send(kCount, 1.0f), recv(kCount);
  ncclResult_t r = ncclSuccess;
  Clock::time_point failedCallStart;
  int calls = 0;
  for (; calls < 100000 && r == ncclSuccess; ++calls) {
    failedCallStart = Clock::now();
    r = ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, comm, nullptr);
  }
  const double took = secondsSince(failedCallStart);
  const std::string message = ncclGetLastError(comm);
  if (getenv("SHOW_MESSAGES")) fprintf(stderr, "[rank %d, %.2f s] %s\n", rank, took, message.c_str());
  MP_CHECK(r == ncclRemoteError || r == ncclSystemError,
           "rank %d: after %d calls ncclAllReduce returned %d (%s), want a remote/system error", rank, calls,
           static_cast<int>(r), ncclGetErrorString(r));
  MP_EXPECT(took < kDetectSeconds, "rank %d: the failing call took %.1f s (limit %.0f s): %s", rank, took,
            kDetectSeconds, message.c_str());
  MP_EXPECT(message.find("rank " + std::to_string(kVictim)) != std::string::npos,
            "rank %d: the error does not name the lost rank %d: %s", rank, kVictim, message.c_str());

  ncclResult_t async = ncclSuccess;
  MP_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
  MP_EXPECT(async == r, "rank %d: ncclCommGetAsyncError gives %d, want %d", rank, static_cast<int>(async),
            static_cast<int>(r));
  const Clock::time_point again = Clock::now();
  ncclResult_t later = ncclAllReduce(send.data(), recv.data(), 16, ncclFloat32, ncclSum, comm, nullptr);
  MP_EXPECT(later != ncclSuccess && secondsSince(again) < 1.0,
            "rank %d: a call on the failed communicator returned %d after %.2f s; want an error at once", rank,
            static_cast<int>(later), secondsSince(again));

  const Clock::time_point destroyStart = Clock::now();
  mptest::progress("rank %d: ncclCommAbort after the failure", rank);
  MP_NCCL_CHECK(ncclCommAbort(comm));
  MP_EXPECT(secondsSince(destroyStart) < 5.0, "rank %d: ncclCommAbort took %.1f s", rank,
            secondsSince(destroyStart));
}

void runVictimScenario(const std::string& transport) {
  const mptest::RunReport report = mptest::runRanksReport(
      kRanks,
      [&transport](int rank, int nranks, const ncclUniqueId& id) {
        mptest::hostIdForTransport(transport, rank);
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        if (rank == kVictim) {
          // Die from another thread while this one is inside the collectives.
          std::thread killer([] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            kill(getpid(), SIGKILL);
          });
          killer.detach();
          std::vector<float> send(kCount, 1.0f), recv(kCount);
          for (;;) ncclAllReduce(send.data(), recv.data(), kCount, ncclFloat32, ncclSum, comm, nullptr);
        }
        survive(comm, rank);
      },
      options(transport));
  ASSERT_TRUE(report.setupError.empty()) << report.setupError;
  ASSERT_EQ(report.ranks.size(), static_cast<size_t>(kRanks));
  for (const mptest::RankOutcome& o : report.ranks) {
    if (o.rank == kVictim) {
      EXPECT_EQ(o.kind, mptest::RankOutcome::kCrashed) << report.summary();
      EXPECT_EQ(o.detail, SIGKILL) << report.summary();
    } else {
      EXPECT_EQ(o.kind, mptest::RankOutcome::kOk) << report.summary();
    }
  }
}

// Over TCP a rank's process may be gone while its connection still carries
// what it sent: a rank that finished exits while its last bytes are in the
// sockets. Forced here: rank 0 forks a child that keeps its sockets and sends
// the second message 1.5 s later, while rank 0's own process has exited. The
// receiver must wait for the data, not blame the gone process (the bridge
// reports a closed connection once what came before was consumed).
TEST(MpPeerGone, AProcessGoneWithItsConnectionOpenIsNoFailure) {
  constexpr size_t kElems = 4096;
  mptest::runRanks(
      2,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        std::vector<float> buf(kElems, 1.0f);
        if (rank == 0) {
          MP_NCCL_CHECK(ncclSend(buf.data(), kElems, ncclFloat32, 1, comm, nullptr));  // connects
          if (fork() == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(1500));
            std::fill(buf.begin(), buf.end(), 42.0f);
            _exit(ncclSend(buf.data(), kElems, ncclFloat32, 1, comm, nullptr) == ncclSuccess ? 0 : 1);
          }
          mptest::detail::childExit(0);  // rank 0's process is gone; its child holds the sockets
        }
        MP_NCCL_CHECK(ncclRecv(buf.data(), kElems, ncclFloat32, 0, comm, nullptr));
        const Clock::time_point start = Clock::now();
        const ncclResult_t r = ncclRecv(buf.data(), kElems, ncclFloat32, 0, comm, nullptr);
        MP_CHECK(r == ncclSuccess, "rank 1: the second receive returned %d: %s", static_cast<int>(r),
                 ncclGetLastError(comm));
        MP_EXPECT(buf[kElems - 1] == 42.0f, "rank 1: received %g, want 42", buf[kElems - 1]);
        MP_EXPECT(secondsSince(start) > 1.0, "rank 1: the message came %.2f s after the call, before it was sent",
                  secondsSince(start));
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      mptest::transportOptions("tcp", 60));
}

class MpPeerFailure : public ::testing::TestWithParam<std::string> {};

TEST_P(MpPeerFailure, SurvivorsGetAnErrorNamingTheDeadRankWithinSeconds) { runVictimScenario(GetParam()); }

// NCCL's way out of a stuck call: ncclCommAbort from another thread. The waiting
// call must return an error promptly, and the abort must not free the
// communicator under it.
TEST_P(MpPeerFailure, AbortFromAnotherThreadEndsAWaitingCall) {
  mptest::RankOptions opts = options(GetParam());
  const std::string transport = GetParam();
  mptest::runRanks(
      2,
      [&transport](int rank, int nranks, const ncclUniqueId& id) {
        mptest::hostIdForTransport(transport, rank);
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        std::vector<float> a(1024, 1.0f), b(1024);
        MP_NCCL_CHECK(ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat32, ncclSum, comm, nullptr));
        if (rank == 1) {  // never joins the second call; aborts its side later
          std::this_thread::sleep_for(std::chrono::seconds(2));
          MP_NCCL_CHECK(ncclCommAbort(comm));
          return;
        }
        ncclResult_t abortResult = ncclInternalError;
        double abortTook = 0;
        std::thread aborter([&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          const Clock::time_point t = Clock::now();
          abortResult = ncclCommAbort(comm);
          abortTook = secondsSince(t);
        });
        const Clock::time_point start = Clock::now();
        const ncclResult_t r = ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat32, ncclSum, comm, nullptr);
        const double took = secondsSince(start);
        aborter.join();
        MP_EXPECT(r != ncclSuccess, "the call on the aborted communicator succeeded");
        MP_EXPECT(took < 2.0, "the waiting call returned %.2f s after it started (abort at 0.3 s)", took);
        MP_EXPECT(abortResult == ncclSuccess && abortTook < 2.0, "ncclCommAbort returned %d after %.2f s",
                  static_cast<int>(abortResult), abortTook);
      },
      opts);
}

INSTANTIATE_TEST_SUITE_P(Transports, MpPeerFailure, ::testing::Values("shm", "tcp", "2hosts"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
