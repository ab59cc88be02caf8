// Hang diagnosis: a rank that never arrives makes the others time out at
// BRAID_TIMEOUT with an error naming the peer they waited for; each prints what
// it waited on, and rank 0 prints a summary naming the rank that never arrived.
// SIGUSR1 makes a waiting rank print the same description without failing.
#include <nccl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/mp_harness.h"
#include "common/mp_nccl.h"

namespace {

using Clock = std::chrono::steady_clock;

// Sends this process's stderr to a file, so the rank can read what braid printed.
class CapturedStderr {
 public:
  explicit CapturedStderr(int rank) : path_("/tmp/braid_diag_" + std::to_string(getpid()) + "_" + std::to_string(rank)) {
    fflush(stderr);
    MP_CHECK(freopen(path_.c_str(), "w", stderr) != nullptr, "cannot redirect stderr to %s", path_.c_str());
  }
  ~CapturedStderr() { unlink(path_.c_str()); }
  std::string text() const {
    fflush(stderr);
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string path_;
};

TEST(MpHangDiagnosis, MissingRankTimesOutWithDiagnosisAndRootSummary) {
  mptest::RankOptions opts = mptest::transportOptions("shm", 90);
  opts.env.push_back({"BRAID_TIMEOUT", "3"});
  mptest::runRanks(
      3,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        std::vector<float> a(1024, 1.0f), b(1024);
        MP_NCCL_CHECK(ncclAllReduce(a.data(), b.data(), 1024, ncclFloat32, ncclSum, comm, nullptr));
        if (rank == 2) {
          // Never arrives at the second collective; stays alive past the others' timeout.
          std::this_thread::sleep_for(std::chrono::seconds(9));
          MP_NCCL_CHECK(ncclCommAbort(comm));
          return;
        }
        CapturedStderr err(rank);
        const Clock::time_point start = Clock::now();
        const ncclResult_t r = ncclAllReduce(a.data(), b.data(), 1024, ncclFloat32, ncclSum, comm, nullptr);
        const double took = std::chrono::duration<double>(Clock::now() - start).count();
        const std::string message = ncclGetLastError(comm);
        const std::string printed = err.text();
        MP_EXPECT(r == ncclSystemError, "rank %d: got %d (%s), want ncclSystemError", rank, static_cast<int>(r),
                  message.c_str());
        MP_EXPECT(took >= 2.5 && took < 8.0, "rank %d: the call failed after %.1f s with BRAID_TIMEOUT=3", rank, took);
        MP_EXPECT(message.find("timed out") != std::string::npos, "rank %d: %s", rank, message.c_str());
        MP_EXPECT(printed.find("braid diagnosis: rank " + std::to_string(rank) + " of 3") != std::string::npos &&
                      printed.find("op #2 AllReduce(count=1024, float32)") != std::string::npos,
                  "rank %d printed no diagnosis of op #2:\n%s", rank, printed.c_str());
        if (rank == 0)
          MP_EXPECT(printed.find("never arrived (no report: dead, or hung outside braid): ranks 2") !=
                        std::string::npos,
                    "rank 0's summary does not name rank 2:\n%s", printed.c_str());
        MP_NCCL_CHECK(ncclCommAbort(comm));
      },
      opts);
}

// Runs `call` with stderr captured while this process gets a SIGUSR1 after
// 700 ms, when the rank waits inside it; returns what braid printed.
template <typename Call>
std::string printedWhilePoked(int rank, Call call) {
  CapturedStderr err(rank);
  std::thread poke([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    kill(getpid(), SIGUSR1);
  });
  call();
  poke.join();
  return err.text();
}

// Rank 1 joins an all-reduce 2 s late; rank 0, poked while it waits, must
// finish it correctly and have printed what it waited for. `warm`: a first
// all-reduce connects the ranks, so the wait is inside the collective itself;
// otherwise it is in the connection set-up. `transport` as mptest::transportOptions.
void pokeRankWaitingForALateAllReduce(bool warm, void (*check)(const std::string& printed),
                                      const char* transport = "shm") {
  mptest::runRanks(
      2,
      [warm, check](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        std::vector<float> a(64, 1.0f), b(64);
        if (warm) MP_NCCL_CHECK(ncclAllReduce(a.data(), b.data(), 64, ncclFloat32, ncclSum, comm, nullptr));
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::seconds(2));  // late, not lost
          MP_NCCL_CHECK(ncclAllReduce(a.data(), b.data(), 64, ncclFloat32, ncclSum, comm, nullptr));
          MP_NCCL_CHECK(ncclCommDestroy(comm));
          return;
        }
        const std::string printed = printedWhilePoked(rank, [&] {
          MP_NCCL_CHECK(ncclAllReduce(a.data(), b.data(), 64, ncclFloat32, ncclSum, comm, nullptr));
        });
        MP_CHECK(b[0] == 2.0f, "the late collective still completes correctly (got %g)", b[0]);
        check(printed);
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      mptest::transportOptions(transport, 60));
}

TEST(MpHangDiagnosis, Sigusr1PrintsWhatAWaitingRankWaitsFor) {
  pokeRankWaitingForALateAllReduce(true, [](const std::string& printed) {
    MP_EXPECT(printed.find("braid diagnosis: rank 0 of 2") != std::string::npos &&
                  printed.find("op #2 AllReduce(count=64, float32)") != std::string::npos &&
                  printed.find("rank 1") != std::string::npos,
              "SIGUSR1 printed no diagnosis:\n%s", printed.c_str());
  });
}

// SIGUSR1 while a rank is still creating its communicator (the other rank is
// late): it must neither kill the rank nor be lost, but say where it waits.
TEST(MpHangDiagnosis, Sigusr1DuringCreationPrintsAndDoesNotKill) {
  mptest::runRanks(
      2,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::seconds(2));
          MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
          MP_NCCL_CHECK(ncclCommDestroy(comm));
          return;
        }
        const std::string printed =
            printedWhilePoked(rank, [&] { MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank)); });
        MP_EXPECT(printed.find("braid diagnosis: rank 0 of 2: in communicator creation, waiting for every rank "
                               "to check in") != std::string::npos,
                  "SIGUSR1 during creation printed nothing:\n%s", printed.c_str());
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      mptest::transportOptions("shm", 60));
}

// SIGUSR1 while the first collective sets up its connections to a late rank.
TEST(MpHangDiagnosis, Sigusr1DuringConnectionSetUpNamesThePeer) {
  pokeRankWaitingForALateAllReduce(false, [](const std::string& printed) {
    MP_EXPECT(printed.find("braid diagnosis: rank 0 of 2: setting up connections, waiting for rank 1") !=
                  std::string::npos,
              "SIGUSR1 during connection set-up printed nothing:\n%s", printed.c_str());
  });
}

}  // namespace
