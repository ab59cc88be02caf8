// Communicator management and argument checking through the public API, with
// ranks as forked processes: bad inputs, ncclCommSplit, count/rank queries,
// groups spanning communicators, nested groups, nonblocking communicators,
// finalize/destroy/abort, and ncclCommInitAll in one process.
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/mp_harness.h"
#include "common/mp_nccl.h"

namespace {

constexpr cudaStream_t kHostStream = nullptr;

// Distinct, exactly representable per-rank data: value(rank, i).
float value(int rank, size_t i) { return static_cast<float>(rank * 1000 + static_cast<int>(i % 997)); }

std::vector<float> rankData(int rank, size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = value(rank, i);
  return v;
}

// Every rank calls the same invalid thing; it must be refused, not crash.
void expectRejected(const char* what, ncclResult_t r) {
  MP_EXPECT(r == ncclInvalidArgument || r == ncclInvalidUsage,
            "%s returned %d (%s), want ncclInvalidArgument or ncclInvalidUsage", what,
            static_cast<int>(r), ncclGetErrorString(r));
  const char* last = ncclGetLastError(nullptr);
  MP_EXPECT(last != nullptr && last[0] != '\0', "%s: ncclGetLastError is empty after the error", what);
}

// Waits for a nonblocking communicator to leave ncclInProgress.
ncclResult_t settle(ncclComm_t comm, ncclResult_t first, const char* what) {
  if (first != ncclInProgress) return first;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) {
    MP_NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
    if (std::chrono::steady_clock::now() > deadline)
      mptest::checkFailed(__FILE__, __LINE__, "%s: still ncclInProgress after 60 s", what);
    if (state == ncclInProgress) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return state;
}

void checkFloats(const char* what, const float* got, const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      mptest::expectFailed(__FILE__, __LINE__, "%s: element %zu is %g, want %g", what, i, got[i], want[i]);
      return;
    }
  }
}

// AllReduce(sum) of rankData over the members, checked against the sum of
// value(globalRank) for the given global ranks.
void allReduceAndCheck(const char* what, ncclComm_t comm, int myGlobalRank,
                       const std::vector<int>& members, size_t count = 257) {
  const std::vector<float> send = rankData(myGlobalRank, count);
  std::vector<float> recv(count, -1.0f);
  mptest::progress("%s", what);
  MP_NCCL_CHECK(ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, kHostStream));
  std::vector<float> want(count, 0.0f);
  for (size_t i = 0; i < count; ++i)
    for (int g : members) want[i] += value(g, i);
  checkFloats(what, recv.data(), want);
}

std::vector<int> iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

ncclComm_t initComm(int rank, int nranks, const ncclUniqueId& id) {
  mptest::checkRunsBraid();
  ncclComm_t comm = nullptr;
  mptest::progress("ncclCommInitRank");
  MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
  MP_CHECK(comm != nullptr, "ncclCommInitRank gave a NULL communicator");
  return comm;
}

// ---- bad inputs ------------------------------------------------------------------------

TEST(MpApi, BadArgumentsAreRefusedAndTheCommunicatorStillWorks) {
  mptest::runRanks(
      2,
      [](int rank, int nranks, const ncclUniqueId& id) {
        mptest::checkRunsBraid();
        mptest::progress("invalid init arguments");
        ncclComm_t bad = nullptr;
        expectRejected("ncclCommInitRank with rank == nranks", ncclCommInitRank(&bad, nranks, id, nranks));
        expectRejected("ncclCommInitRank with rank -1", ncclCommInitRank(&bad, nranks, id, -1));
        expectRejected("ncclCommInitRank with nranks 0", ncclCommInitRank(&bad, 0, id, 0));
        expectRejected("ncclCommInitRank with a NULL comm pointer", ncclCommInitRank(nullptr, nranks, id, rank));
        expectRejected("ncclGetUniqueId(NULL)", ncclGetUniqueId(nullptr));

        ncclComm_t comm = initComm(rank, nranks, id);
        std::vector<float> a(16, 1.0f), b(16, 0.0f);
        mptest::progress("invalid collective arguments");
        expectRejected("AllReduce on a NULL comm",
                       ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, nullptr, kHostStream));
        expectRejected("AllReduce with a NULL sendbuff",
                       ncclAllReduce(nullptr, b.data(), 16, ncclFloat32, ncclSum, comm, kHostStream));
        expectRejected("AllReduce with a NULL recvbuff",
                       ncclAllReduce(a.data(), nullptr, 16, ncclFloat32, ncclSum, comm, kHostStream));
        expectRejected("AllGather with a NULL recvbuff",
                       ncclAllGather(a.data(), nullptr, 8, ncclFloat32, comm, kHostStream));
        expectRejected("Send with a NULL buffer", ncclSend(nullptr, 16, ncclFloat32, (rank + 1) % nranks, comm, kHostStream));
        expectRejected("Recv with a NULL buffer", ncclRecv(nullptr, 16, ncclFloat32, (rank + 1) % nranks, comm, kHostStream));
        expectRejected("AllReduce with datatype 99",
                       ncclAllReduce(a.data(), b.data(), 16, static_cast<ncclDataType_t>(99), ncclSum, comm, kHostStream));
        expectRejected("Broadcast with datatype ncclNumTypes",
                       ncclBroadcast(a.data(), b.data(), 16, ncclNumTypes, 0, comm, kHostStream));
        expectRejected("AllReduce with op 99",
                       ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, static_cast<ncclRedOp_t>(99), comm, kHostStream));
        expectRejected("Reduce with op ncclNumOps (no such PreMulSum op)",
                       ncclReduce(a.data(), b.data(), 16, ncclFloat32, ncclNumOps, 0, comm, kHostStream));
        expectRejected("Broadcast with root == nranks",
                       ncclBroadcast(a.data(), b.data(), 16, ncclFloat32, nranks, comm, kHostStream));
        expectRejected("Broadcast with root -1",
                       ncclBroadcast(a.data(), b.data(), 16, ncclFloat32, -1, comm, kHostStream));
        expectRejected("Reduce with root == nranks",
                       ncclReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, nranks, comm, kHostStream));
        expectRejected("Gather with root == nranks",
                       ncclGather(a.data(), b.data(), 8, ncclFloat32, nranks, comm, kHostStream));
        expectRejected("Scatter with root -1",
                       ncclScatter(a.data(), b.data(), 8, ncclFloat32, -1, comm, kHostStream));
        expectRejected("Send to peer == nranks", ncclSend(a.data(), 16, ncclFloat32, nranks, comm, kHostStream));
        expectRejected("Recv from peer -1", ncclRecv(b.data(), 16, ncclFloat32, -1, comm, kHostStream));
        expectRejected("ncclGroupEnd without ncclGroupStart", ncclGroupEnd());
        expectRejected("ncclCommCount(comm, NULL)", ncclCommCount(comm, nullptr));
        expectRejected("ncclCommUserRank(comm, NULL)", ncclCommUserRank(comm, nullptr));
        expectRejected("ncclCommCount(NULL comm)", [] {
          int c = 0;
          return ncclCommCount(nullptr, &c);
        }());

        // A handle that points at zeroed memory was never initialised.
        mptest::progress("uninitialised communicator");
        std::vector<uint64_t> zeros(4096, 0);
        auto* uninit = reinterpret_cast<ncclComm_t>(zeros.data());
        expectRejected("AllReduce on an uninitialised comm",
                       ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, uninit, kHostStream));
        int count = 0;
        expectRejected("ncclCommCount on an uninitialised comm", ncclCommCount(uninit, &count));

        // A destroyed communicator (a split duplicate, so the parent lives on).
        mptest::progress("destroyed communicator");
        ncclComm_t dup = nullptr;
        MP_NCCL_CHECK(ncclCommSplit(comm, 0, rank, &dup, nullptr));
        MP_CHECK(dup != nullptr, "ncclCommSplit gave NULL");
        MP_NCCL_CHECK(ncclCommDestroy(dup));
        expectRejected("AllReduce on a destroyed comm",
                       ncclAllReduce(a.data(), b.data(), 16, ncclFloat32, ncclSum, dup, kHostStream));

        // None of this may have hurt the communicator.
        ncclResult_t async = ncclInternalError;
        MP_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
        MP_EXPECT(async == ncclSuccess, "async error after refused calls: %s", ncclGetErrorString(async));
        allReduceAndCheck("AllReduce after the refused calls", comm, rank, iota(nranks));
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      mptest::transportOptions("shm", 60));
}

// ---- communicator management, over each transport ------------------------------------

class MpApiTransport : public ::testing::TestWithParam<std::string> {
 protected:
  mptest::RankOptions options() const { return mptest::transportOptions(GetParam(), 90); }
};

TEST_P(MpApiTransport, SplitByParityWithReversedKeysAndNoColor) {
  mptest::runRanks(
      5,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = initComm(rank, nranks, id);
        int count = -1, me = -1;
        MP_NCCL_CHECK(ncclCommCount(comm, &count));
        MP_NCCL_CHECK(ncclCommUserRank(comm, &me));
        MP_EXPECT(count == nranks, "ncclCommCount %d", count);
        MP_EXPECT(me == rank, "ncclCommUserRank %d", me);

        // Parity colors; key = nranks - rank puts the members in descending order.
        mptest::progress("ncclCommSplit by parity");
        ncclComm_t half = nullptr;
        MP_NCCL_CHECK(ncclCommSplit(comm, rank % 2, nranks - rank, &half, nullptr));
        MP_CHECK(half != nullptr, "split gave NULL for color %d", rank % 2);
        std::vector<int> members;  // global ranks in the new order
        for (int g = nranks - 1; g >= 0; --g)
          if (g % 2 == rank % 2) members.push_back(g);
        int halfCount = -1, halfRank = -1;
        MP_NCCL_CHECK(ncclCommCount(half, &halfCount));
        MP_NCCL_CHECK(ncclCommUserRank(half, &halfRank));
        MP_EXPECT(halfCount == static_cast<int>(members.size()), "split count %d, want %zu", halfCount, members.size());
        int wantRank = 0;
        while (members[wantRank] != rank) ++wantRank;
        MP_EXPECT(halfRank == wantRank, "split rank %d, want %d (keys reverse the order)", halfRank, wantRank);
        ncclResult_t async = ncclInternalError;
        MP_NCCL_CHECK(ncclCommGetAsyncError(half, &async));
        MP_EXPECT(async == ncclSuccess, "async error of the split comm: %s", ncclGetErrorString(async));

        // AllGather of the global ranks shows the order of the split comm.
        mptest::progress("AllGather on the split comm");
        int mine = rank;
        std::vector<int> order(members.size(), -1);
        MP_NCCL_CHECK(ncclAllGather(&mine, order.data(), 1, ncclInt32, half, kHostStream));
        for (size_t i = 0; i < members.size(); ++i)
          MP_EXPECT(order[i] == members[i], "split comm rank %zu is global rank %d, want %d", i, order[i], members[i]);
        allReduceAndCheck("AllReduce on the parity split", half, rank, members);

        // Rank 0 opts out: it gets NULL, the others a comm ordered by old rank.
        mptest::progress("ncclCommSplit with NCCL_SPLIT_NOCOLOR on rank 0");
        ncclComm_t rest = reinterpret_cast<ncclComm_t>(&count);  // must be overwritten
        MP_NCCL_CHECK(ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 7, 0, &rest, nullptr));
        if (rank == 0) {
          MP_EXPECT(rest == nullptr, "NCCL_SPLIT_NOCOLOR must give a NULL communicator");
        } else {
          MP_CHECK(rest != nullptr && rest != reinterpret_cast<ncclComm_t>(&count), "split gave no communicator");
          int restRank = -1;
          MP_NCCL_CHECK(ncclCommUserRank(rest, &restRank));
          MP_EXPECT(restRank == rank - 1, "equal keys keep the old order: rank %d, want %d", restRank, rank - 1);
          std::vector<int> restMembers;
          for (int g = 1; g < nranks; ++g) restMembers.push_back(g);
          allReduceAndCheck("AllReduce on the split without rank 0", rest, rank, restMembers);
          MP_NCCL_CHECK(ncclCommDestroy(rest));
        }
        // The parent still works after splitting.
        allReduceAndCheck("AllReduce on the parent after splits", comm, rank, iota(nranks));
        MP_NCCL_CHECK(ncclCommDestroy(half));
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      options());
}

TEST_P(MpApiTransport, GroupSpanningTwoCommunicators) {
  mptest::runRanks(
      3,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = initComm(rank, nranks, id);
        ncclComm_t dup = nullptr;
        MP_NCCL_CHECK(ncclCommSplit(comm, 0, rank, &dup, nullptr));
        MP_CHECK(dup != nullptr, "split gave NULL");

        const size_t count = 300;
        const std::vector<float> send = rankData(rank, count);
        std::vector<float> sum(count, -1.0f), gathered(count * nranks, -1.0f), bcast(count, -1.0f);
        std::vector<float> fromPrev(count, -1.0f);
        const int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
        mptest::progress("group over two communicators");
        MP_NCCL_CHECK(ncclGroupStart());
        MP_NCCL_CHECK(ncclAllReduce(send.data(), sum.data(), count, ncclFloat32, ncclSum, comm, kHostStream));
        MP_NCCL_CHECK(ncclAllGather(send.data(), gathered.data(), count, ncclFloat32, dup, kHostStream));
        MP_NCCL_CHECK(ncclBroadcast(send.data(), bcast.data(), count, ncclFloat32, nranks - 1, comm, kHostStream));
        MP_NCCL_CHECK(ncclSend(send.data(), count, ncclFloat32, next, dup, kHostStream));
        MP_NCCL_CHECK(ncclRecv(fromPrev.data(), count, ncclFloat32, prev, dup, kHostStream));
        MP_NCCL_CHECK(ncclGroupEnd());

        std::vector<float> want(count, 0.0f);
        for (size_t i = 0; i < count; ++i)
          for (int g = 0; g < nranks; ++g) want[i] += value(g, i);
        checkFloats("AllReduce on comm", sum.data(), want);
        for (int g = 0; g < nranks; ++g) checkFloats("AllGather on the duplicate", gathered.data() + g * count, rankData(g, count));
        checkFloats("Broadcast on comm", bcast.data(), rankData(nranks - 1, count));
        checkFloats("Recv on the duplicate", fromPrev.data(), rankData(prev, count));
        MP_NCCL_CHECK(ncclCommDestroy(dup));
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      options());
}

TEST_P(MpApiTransport, NestedGroupsCompleteAtTheOutermostEnd) {
  mptest::runRanks(
      3,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = initComm(rank, nranks, id);
        const size_t count = 100;
        const std::vector<float> send = rankData(rank, count);
        std::vector<float> sum(count, -1.0f), bcast(count, -1.0f), gathered(count * nranks, -1.0f);
        mptest::progress("nested groups");
        MP_NCCL_CHECK(ncclGroupStart());
        MP_NCCL_CHECK(ncclGroupStart());
        MP_NCCL_CHECK(ncclAllReduce(send.data(), sum.data(), count, ncclFloat32, ncclSum, comm, kHostStream));
        MP_NCCL_CHECK(ncclGroupEnd());
        MP_NCCL_CHECK(ncclBroadcast(send.data(), bcast.data(), count, ncclFloat32, 0, comm, kHostStream));
        MP_NCCL_CHECK(ncclGroupStart());
        MP_NCCL_CHECK(ncclGroupStart());
        MP_NCCL_CHECK(ncclAllGather(send.data(), gathered.data(), count, ncclFloat32, comm, kHostStream));
        MP_NCCL_CHECK(ncclGroupEnd());
        MP_NCCL_CHECK(ncclGroupEnd());
        MP_NCCL_CHECK(ncclGroupEnd());
        std::vector<float> want(count, 0.0f);
        for (size_t i = 0; i < count; ++i)
          for (int g = 0; g < nranks; ++g) want[i] += value(g, i);
        checkFloats("AllReduce in the inner group", sum.data(), want);
        checkFloats("Broadcast in the outer group", bcast.data(), rankData(0, count));
        for (int g = 0; g < nranks; ++g) checkFloats("AllGather in the doubly nested group", gathered.data() + g * count, rankData(g, count));
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      options());
}

TEST_P(MpApiTransport, NonblockingCommunicator) {
  mptest::runRanks(
      3,
      [](int rank, int nranks, const ncclUniqueId& id) {
        mptest::checkRunsBraid();
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclComm_t comm = nullptr;
        mptest::progress("nonblocking ncclCommInitRankConfig");
        const ncclResult_t init = ncclCommInitRankConfig(&comm, nranks, id, rank, &config);
        MP_CHECK(init == ncclSuccess || init == ncclInProgress, "init returned %d (%s): %s",
                 static_cast<int>(init), ncclGetErrorString(init), ncclGetLastError(nullptr));
        MP_CHECK(comm != nullptr, "a nonblocking init must hand out the communicator at once");
        const ncclResult_t ready = settle(comm, init, "nonblocking init");
        MP_CHECK(ready == ncclSuccess, "nonblocking init ended with %s: %s", ncclGetErrorString(ready),
                 ncclGetLastError(comm));

        const size_t count = 513;
        const std::vector<float> send = rankData(rank, count);
        std::vector<float> sum(count, -1.0f);
        mptest::progress("AllReduce on the nonblocking comm");
        const ncclResult_t r = ncclAllReduce(send.data(), sum.data(), count, ncclFloat32, ncclSum, comm, kHostStream);
        MP_CHECK(r == ncclSuccess || r == ncclInProgress, "AllReduce returned %s", ncclGetErrorString(r));
        MP_CHECK(settle(comm, r, "nonblocking AllReduce") == ncclSuccess, "AllReduce failed: %s", ncclGetLastError(comm));
        std::vector<float> want(count, 0.0f);
        for (size_t i = 0; i < count; ++i)
          for (int g = 0; g < nranks; ++g) want[i] += value(g, i);
        checkFloats("AllReduce on the nonblocking comm", sum.data(), want);

        mptest::progress("nonblocking finalize");
        const ncclResult_t fin = ncclCommFinalize(comm);
        MP_CHECK(fin == ncclSuccess || fin == ncclInProgress, "finalize returned %s", ncclGetErrorString(fin));
        MP_CHECK(settle(comm, fin, "nonblocking finalize") == ncclSuccess, "finalize failed");
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      options());
}

TEST_P(MpApiTransport, FinalizeThenDestroy) {
  mptest::runRanks(
      3,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = initComm(rank, nranks, id);
        allReduceAndCheck("AllReduce before finalize", comm, rank, iota(nranks));
        mptest::progress("ncclCommFinalize");
        MP_NCCL_CHECK(ncclCommFinalize(comm));
        ncclResult_t async = ncclInternalError;
        MP_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
        MP_EXPECT(async == ncclSuccess, "async error after finalize: %s", ncclGetErrorString(async));
        mptest::progress("ncclCommDestroy");
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      options());
}

TEST_P(MpApiTransport, AbortAfterWorkAndRightAfterInit) {
  mptest::runRanks(
      3,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = initComm(rank, nranks, id);
        allReduceAndCheck("AllReduce before abort", comm, rank, iota(nranks));
        ncclComm_t dup = nullptr;
        MP_NCCL_CHECK(ncclCommSplit(comm, 0, rank, &dup, nullptr));
        mptest::progress("ncclCommAbort after work");
        MP_NCCL_CHECK(ncclCommAbort(comm));
        // A communicator that never ran anything aborts as well.
        mptest::progress("ncclCommAbort of an idle comm");
        MP_NCCL_CHECK(ncclCommAbort(dup));
      },
      options());
}

INSTANTIATE_TEST_SUITE_P(Transports, MpApiTransport, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The NCCL-typical pattern: the launching process makes the id, then forks
// (its bootstrap root keeps running there while the ranks connect).
TEST(MpApi, UniqueIdMadeByTheTestProcessBeforeForking) {
  mptest::RankOptions opts = mptest::transportOptions("shm", 60);
  opts.idSource = mptest::IdSource::Parent;
  for (int round = 0; round < 2; ++round) {  // a second id from the same process
    mptest::runRanks(
        3,
        [](int rank, int nranks, const ncclUniqueId& id) {
          ncclComm_t comm = initComm(rank, nranks, id);
          allReduceAndCheck("AllReduce with the parent's unique id", comm, rank, iota(nranks));
          MP_NCCL_CHECK(ncclCommDestroy(comm));
        },
        opts);
  }
}

// ---- several ranks in one process -------------------------------------------------------

TEST(MpApi, InitAllInOneProcessAndGroupedAllReduceFromOneThread) {
  mptest::RankOptions opts;
  opts.idSource = mptest::IdSource::None;
  opts.timeoutSeconds = 60;
  mptest::runRanks(
      1,
      [](int, int, const ncclUniqueId&) {
        mptest::checkRunsBraid();
        constexpr int kComms = 4;
        ncclComm_t comms[kComms] = {};
        mptest::progress("ncclCommInitAll");
        MP_NCCL_CHECK(ncclCommInitAll(comms, kComms, nullptr));
        for (int i = 0; i < kComms; ++i) {
          MP_CHECK(comms[i] != nullptr, "comm %d is NULL", i);
          int count = -1, me = -1;
          MP_NCCL_CHECK(ncclCommCount(comms[i], &count));
          MP_NCCL_CHECK(ncclCommUserRank(comms[i], &me));
          MP_EXPECT(count == kComms && me == i, "comm %d: count %d rank %d", i, count, me);
        }
        const size_t count = 1000;
        std::vector<std::vector<float>> send(kComms), recv(kComms, std::vector<float>(count, -1.0f));
        std::vector<std::vector<float>> gathered(kComms, std::vector<float>(count * kComms, -1.0f));
        for (int i = 0; i < kComms; ++i) send[i] = rankData(i, count);
        mptest::progress("grouped AllReduce + AllGather over the %d comms", kComms);
        MP_NCCL_CHECK(ncclGroupStart());
        for (int i = 0; i < kComms; ++i) {
          MP_NCCL_CHECK(ncclAllReduce(send[i].data(), recv[i].data(), count, ncclFloat32, ncclSum, comms[i], kHostStream));
          MP_NCCL_CHECK(ncclAllGather(send[i].data(), gathered[i].data(), count, ncclFloat32, comms[i], kHostStream));
        }
        MP_NCCL_CHECK(ncclGroupEnd());
        std::vector<float> want(count, 0.0f);
        for (size_t k = 0; k < count; ++k)
          for (int g = 0; g < kComms; ++g) want[k] += value(g, k);
        for (int i = 0; i < kComms; ++i) {
          checkFloats("AllReduce on one of the InitAll comms", recv[i].data(), want);
          for (int g = 0; g < kComms; ++g)
            checkFloats("AllGather on one of the InitAll comms", gathered[i].data() + g * count, rankData(g, count));
        }
        for (int i = 0; i < kComms; ++i) MP_NCCL_CHECK(ncclCommDestroy(comms[i]));
      },
      opts);
}

}  // namespace
