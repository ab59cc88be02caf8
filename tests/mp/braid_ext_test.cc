// braid's own extensions (include/braid.h) for frameworks on top of braid.
#include <nccl.h>
#include <braid.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "common/mp_harness.h"
#include "common/mp_nccl.h"

namespace {

// The per-communicator timeout replaces BRAID_TIMEOUT (600 s here) for later calls.
TEST(MpBraidExt, CommTimeoutBoundsALaterCall) {
  mptest::runRanks(
      2,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        MP_CHECK(braidCommSetTimeout(comm, 0.0) == ncclInvalidArgument, "a zero timeout was accepted");
        MP_NCCL_CHECK(braidCommSetTimeout(comm, 1.0));
        std::vector<float> a(64, 1.0f), b(64);
        MP_NCCL_CHECK(ncclAllReduce(a.data(), b.data(), 64, ncclFloat32, ncclSum, comm, nullptr));
        if (rank == 1) {  // skips the next call
          std::this_thread::sleep_for(std::chrono::seconds(4));
          MP_NCCL_CHECK(ncclCommAbort(comm));
          return;
        }
        const auto start = std::chrono::steady_clock::now();
        const ncclResult_t r = ncclAllReduce(a.data(), b.data(), 64, ncclFloat32, ncclSum, comm, nullptr);
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        MP_EXPECT(r == ncclSystemError, "got %d, want a timeout (ncclSystemError)", static_cast<int>(r));
        MP_EXPECT(took > 0.8 && took < 3.5, "the call gave up after %.1f s with a 1 s timeout", took);
        MP_NCCL_CHECK(ncclCommAbort(comm));
      },
      mptest::transportOptions("shm", 60));
}

// braidCommInitRankTimeout bounds creation itself: rank 1 never joins, and
// rank 0 gives up after its 1 s although BRAID_TIMEOUT says 600 s.
TEST(MpBraidExt, InitTimeoutBoundsCreation) {
  mptest::RankOptions opts = mptest::transportOptions("shm", 60);
  opts.env.push_back({"BRAID_TIMEOUT", "600"});
  mptest::runRanks(
      2,
      [](int rank, int nranks, const ncclUniqueId& id) {
        if (rank == 1) {
          std::this_thread::sleep_for(std::chrono::seconds(4));
          return;
        }
        ncclComm_t comm = nullptr;
        MP_CHECK(braidCommInitRankTimeout(&comm, nranks, id, rank, nullptr, -1.0) == ncclInvalidArgument,
                 "a negative timeout was accepted");
        const auto start = std::chrono::steady_clock::now();
        const ncclResult_t r = braidCommInitRankTimeout(&comm, nranks, id, rank, nullptr, 1.0);
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        MP_EXPECT(r != ncclSuccess, "creation succeeded without rank 1");
        MP_EXPECT(took > 0.8 && took < 30, "creation gave up after %.1f s with a 1 s timeout", took);
        if (comm) (void)ncclCommDestroy(comm);
      },
      opts);
}

// ncclGetUniqueId follows NCCL_COMM_ID (the same id every time); the private one does not.
TEST(MpBraidExt, PrivateUniqueIdsDifferUnderNcclCommId) {
  mptest::RankOptions opts;
  opts.idSource = mptest::IdSource::None;
  opts.env.push_back({"NCCL_COMM_ID", "127.0.0.1:29677"});
  mptest::runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        ncclUniqueId a, b, c, d;
        MP_NCCL_CHECK(ncclGetUniqueId(&a));
        MP_NCCL_CHECK(ncclGetUniqueId(&b));
        MP_CHECK(std::memcmp(&a, &b, sizeof a) == 0, "NCCL_COMM_ID ids differ");
        MP_NCCL_CHECK(braidGetPrivateUniqueId(&c));
        MP_NCCL_CHECK(braidGetPrivateUniqueId(&d));
        MP_CHECK(std::memcmp(&c, &d, sizeof c) != 0 && std::memcmp(&c, &a, sizeof c) != 0,
                 "private ids repeat or follow NCCL_COMM_ID");
        // A private id makes a working one-rank communicator.
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, 1, c, 0));
        MP_NCCL_CHECK(ncclCommDestroy(comm));
        MP_CHECK(braidGetPrivateUniqueId(nullptr) == ncclInvalidArgument, "NULL accepted");
      },
      opts);
}

}  // namespace
