// The engine's host runner (src/engine/lanes): what the correctness suites
// (mp_collectives_test, mp_algorithms_test, mp_peer_failure_test,
// threads_collectives_test) cannot show: that its FIFOs, of both protocols,
// appear in the log, that it bridges FIFOs between hosts over TCP, that a
// bad BRAID_DEVICE_ENGINE is refused, and that one thread driving every rank
// of ncclCommInitAll through one group works.
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "common/log_dir.h"
#include "common/mp_harness.h"
#include "common/mp_nccl.h"

namespace {

using mptest::countContaining;

// A small (LL) and a large (bulk) allreduce, checked.
void twoAllReduces(ncclComm_t comm, int rank, int nranks) {
  for (size_t count : {size_t{4}, size_t{1} << 20}) {
    std::vector<float> send(count, float(rank + 1)), recv(count, -1.0f);
    MP_NCCL_CHECK(ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, nullptr));
    const float want = float(nranks * (nranks + 1) / 2);
    for (size_t i = 0; i < count; ++i)
      MP_CHECK(recv[i] == want, "rank %d: element %zu of %zu is %g, want %g", rank, i, count, recv[i], want);
  }
}

// Runs twoAllReduces on `nranks` ranks with INIT logging on; `twoHosts` puts odd and even ranks on two "hosts"
// (BRAID_HOSTID). Returns every rank's log lines.
std::vector<std::string> runLogged(int nranks, bool twoHosts) {
  char dir[] = "/tmp/braid_lanes_log_XXXXXX";
  if (mkdtemp(dir) == nullptr) return {};
  mptest::RankOptions o = mptest::transportOptions("shm", 60);
  o.env.push_back({"NCCL_DEBUG", "INFO"});
  o.env.push_back({"NCCL_DEBUG_SUBSYS", "INIT"});
  o.env.push_back({"NCCL_DEBUG_FILE", std::string(dir) + "/rank.%p.log"});
  mptest::runRanks(
      nranks,
      [twoHosts](int rank, int n, const ncclUniqueId& id) {
        if (twoHosts) setenv("BRAID_HOSTID", rank % 2 ? "lanes-host-b" : "lanes-host-a", 1);
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, n, id, rank));
        twoAllReduces(comm, rank, n);
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      o);
  return mptest::readLogLines(dir);
}

TEST(MpLaneExecutor, RunsOverSharedMemoryFifosOfBothProtocols) {
  const std::vector<std::string> lines = runLogged(3, false);
  EXPECT_GT(countContaining(lines, "LL (shm)"), 0u) << "no LL lane FIFO was logged";
  EXPECT_GT(countContaining(lines, "bulk (shm)"), 0u) << "no bulk lane FIFO was logged";
}

// Ranks on two hosts cannot share FIFO memory: FIFOs across hosts are bridged
// over TCP by the network proxy, those within a host stay in shared memory.
TEST(MpLaneExecutor, JobsSpanningHostsBridgeFifosOverTheNetwork) {
  const std::vector<std::string> lines = runLogged(4, true);
  EXPECT_GT(countContaining(lines, "(bridged over tcp"), 0u) << "no lane FIFO was bridged over TCP";
  EXPECT_GT(countContaining(lines, "(shm)"), 0u) << "no lane FIFO within a host used shared memory";
}

TEST(MpLaneExecutor, UnknownDeviceEngineIsRefusedAtInit) {
  mptest::RankOptions o = mptest::transportOptions("shm", 60);
  o.env.push_back({"BRAID_DEVICE_ENGINE", "gpu-please"});
  mptest::runRanks(
      2,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        const ncclResult_t r = ncclCommInitRank(&comm, nranks, id, rank);
        MP_CHECK(r == ncclInvalidArgument, "ncclCommInitRank returned %d, want ncclInvalidArgument", int(r));
        const std::string message = ncclGetLastError(nullptr);
        MP_EXPECT(message.find("BRAID_DEVICE_ENGINE") != std::string::npos, "the error does not name the variable: %s",
                  message.c_str());
      },
      o);
}

// One group mixing schedules (tree and two-channel ring), protocols (LL and
// bulk), datatypes and point-to-point calls: lanes of different operations share
// FIFOs, so each operation's lanes must wait for the one before.
TEST(MpLaneExecutor, GroupMixingSchedulesProtocolsAndTypes) {
  mptest::RankOptions o = mptest::transportOptions("shm", 60);
  o.env.push_back({"NCCL_ALGO", "allreduce:tree;allgather:ring"});
  o.env.push_back({"BRAID_NCHANNELS", "2"});
  mptest::runRanks(
      3,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        constexpr size_t kBig = 100000, kGather = 50000, kSmall = 10, kP2p = 1000;
        std::vector<int32_t> big(kBig, rank + 1), bigSum(kBig, 0);
        std::vector<float> piece(kGather), gathered(kGather * nranks, -1);
        for (size_t i = 0; i < kGather; ++i) piece[i] = float(rank * kGather + i);
        std::vector<int8_t> small(kSmall, int8_t(rank)), smallMax(kSmall, -1);
        std::vector<double> out(kP2p, rank), in(kP2p, -1);
        for (int round = 0; round < 3; ++round) {
          MP_NCCL_CHECK(ncclGroupStart());
          MP_NCCL_CHECK(ncclAllReduce(big.data(), bigSum.data(), kBig, ncclInt32, ncclSum, comm, nullptr));
          MP_NCCL_CHECK(ncclAllGather(piece.data(), gathered.data(), kGather, ncclFloat32, comm, nullptr));
          MP_NCCL_CHECK(ncclAllReduce(small.data(), smallMax.data(), kSmall, ncclInt8, ncclMax, comm, nullptr));
          MP_NCCL_CHECK(ncclSend(out.data(), kP2p, ncclFloat64, (rank + 1) % nranks, comm, nullptr));
          MP_NCCL_CHECK(ncclRecv(in.data(), kP2p, ncclFloat64, (rank + nranks - 1) % nranks, comm, nullptr));
          MP_NCCL_CHECK(ncclGroupEnd());
          for (size_t i = 0; i < kBig; ++i) MP_CHECK(bigSum[i] == 6, "round %d: sum[%zu] = %d", round, i, bigSum[i]);
          for (size_t i = 0; i < gathered.size(); ++i)
            MP_CHECK(gathered[i] == float(i), "round %d: gathered[%zu] = %g", round, i, gathered[i]);
          for (size_t i = 0; i < kSmall; ++i) MP_CHECK(smallMax[i] == 2, "round %d: max[%zu] = %d", round, i, smallMax[i]);
          for (size_t i = 0; i < kP2p; ++i)
            MP_CHECK(in[i] == double((rank + nranks - 1) % nranks), "round %d: received[%zu] = %g", round, i, in[i]);
        }
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      o);
}

// "zero copy: rank R: A of B messages ... by reference, C of D received in
// place" lines of rank `rank`, in log order, as {A, B, C, D}.
std::vector<std::vector<size_t>> zeroCopyCounts(const std::vector<std::string>& lines, int rank) {
  std::vector<std::vector<size_t>> out;
  const std::string key = "zero copy: rank " + std::to_string(rank) + ":";
  for (const std::string& l : lines) {
    const size_t at = l.find(key);
    if (at == std::string::npos) continue;
    size_t a = 0, b = 0, c = 0, d = 0;
    if (sscanf(l.c_str() + at + key.size(), " %zu of %zu messages to other hosts sent by reference, %zu of %zu",
               &a, &b, &c, &d) == 4)
      out.push_back({a, b, c, d});
  }
  return out;
}

// Between hosts, a ring allreduce sends its messages from the user's buffers
// and receives them into them: no lane copies one, out of place or in place
// (where the chunk a rank sent comes back reduced into the same bytes: the
// bridge holds that message until the chunk has left). The choice is made
// when the buffers change, not per call; every result is checked.
TEST(MpLaneExecutor, MessagesToOtherHostsSkipTheLanesCopiesWhereNothingElseTouchesThem) {
  const std::string dir = mptest::makeLogDir("braid_zero_copy_");
  ASSERT_FALSE(dir.empty());
  mptest::RankOptions o = mptest::transportOptions("2hosts", 60);
  o.env.push_back({"NCCL_DEBUG", "INFO"});
  o.env.push_back({"NCCL_DEBUG_SUBSYS", "NET"});
  o.env.push_back({"NCCL_DEBUG_FILE", dir + "/rank.%p.log"});
  o.env.push_back({"NCCL_ALGO", "ring"});
  mptest::runRanks(
      2,
      [](int rank, int n, const ncclUniqueId& id) {
        mptest::hostIdForTransport("2hosts", rank);
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, n, id, rank));
        constexpr size_t kCount = size_t{1} << 20;
        std::vector<float> send(kCount), recv(kCount, -1.0f);
        for (int round = 0; round < 6; ++round) {
          const bool inPlace = round >= 2;
          for (size_t i = 0; i < kCount; ++i) send[i] = float(i % 1000) + float(rank);
          float* out = inPlace ? send.data() : recv.data();
          MP_NCCL_CHECK(ncclAllReduce(send.data(), out, kCount, ncclFloat32, ncclSum, comm, nullptr));
          for (size_t i = 0; i < kCount; ++i)
            MP_CHECK(out[i] == 2.0f * float(i % 1000) + 1.0f, "round %d: element %zu is %g", round, i, out[i]);
          if (!inPlace)
            for (size_t i = 0; i < kCount; ++i)
              MP_CHECK(send[i] == float(i % 1000) + float(rank), "round %d: input element %zu changed", round, i);
        }
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      o);
  const std::vector<std::string> lines = mptest::readLogLines(dir);
  for (int rank = 0; rank < 2; ++rank) {
    const auto counts = zeroCopyCounts(lines, rank);
    ASSERT_EQ(counts.size(), 2u) << "rank " << rank << ": one choice out of place, one in place, each kept";
    const std::vector<size_t>& out = counts[0];
    EXPECT_GT(out[1], 0u);
    EXPECT_EQ(out[0], out[1]) << "rank " << rank << ": out of place, some message was copied to be sent";
    EXPECT_GT(out[3], 0u);
    EXPECT_EQ(out[2], out[3]) << "rank " << rank << ": out of place, some message was copied once received";
    EXPECT_EQ(counts[1], out) << "rank " << rank << ": in place, not as out of place";
  }
}

// Recursive doubling between two hosts sends each round's sum by reference
// and overwrites it with the next round's: the bridge holds the message that
// overwrites it until it left. A peer that runs ahead may have that message
// delivered during the previous call already, when nothing held it: then the
// sum goes by value. Many calls back to back, each result checked, in place
// and out of place, odd ranks.
TEST(MpLaneExecutor, SumsSentByReferenceAreNeverOverwrittenBeforeTheyLeave) {
  mptest::RankOptions o = mptest::transportOptions("2hosts", 120);
  o.env.push_back({"NCCL_ALGO", "allreduce:recursivedoubling"});
  mptest::runRanks(
      5,
      [](int rank, int n, const ncclUniqueId& id) {
        mptest::hostIdForTransport("2hosts", rank);
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, n, id, rank));
        constexpr size_t kCount = 4099;  // one message of 16 KiB and a bit per round
        std::vector<float> send(kCount), recv(kCount);
        for (int call = 0; call < 300; ++call) {
          const bool inPlace = call % 3 == 2;
          for (size_t i = 0; i < kCount; ++i) send[i] = float((i + size_t(call)) % 1000) * float(rank + 1);
          float* out = inPlace ? send.data() : recv.data();
          MP_NCCL_CHECK(ncclAllReduce(send.data(), out, kCount, ncclFloat32, ncclSum, comm, nullptr));
          for (size_t i = 0; i < kCount; ++i)
            MP_CHECK(out[i] == float((i + size_t(call)) % 1000) * 15.0f, "call %d (%s): element %zu is %g", call,
                     inPlace ? "in place" : "out of place", i, out[i]);
        }
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      o);
}

// One thread issues the calls of every rank in one group: it must make the
// FIFOs of all ranks before it waits for any (port_table.h: offer, accept).
TEST(LaneExecutorOneThread, GroupOverEveryRankOfCommInitAll) {
  constexpr int kRanks = 4;
  constexpr size_t kSmall = 13, kLarge = 70001;
  std::vector<ncclComm_t> comms(kRanks);
  ASSERT_EQ(ncclCommInitAll(comms.data(), kRanks, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<float>> in(kRanks), sum(kRanks);
  std::vector<std::vector<int32_t>> mine(kRanks), all(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    in[r].assign(kSmall, float(r + 1));
    sum[r].assign(kSmall, 0);
    mine[r].resize(kLarge);
    std::iota(mine[r].begin(), mine[r].end(), int32_t(r) * int32_t(kLarge));
    all[r].assign(kLarge * kRanks, -1);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(ncclAllReduce(in[r].data(), sum[r].data(), kSmall, ncclFloat32, ncclSum, comms[r], nullptr),
              ncclSuccess);
    ASSERT_EQ(ncclAllGather(mine[r].data(), all[r].data(), kLarge, ncclInt32, comms[r], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < kSmall; ++i) ASSERT_EQ(sum[r][i], 10.0f) << "rank " << r << " element " << i;
    for (size_t i = 0; i < all[r].size(); ++i) ASSERT_EQ(all[r][i], int32_t(i)) << "rank " << r << " element " << i;
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

}  // namespace
