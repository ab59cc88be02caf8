// BRAID_CHECK=1: ranks that call different collectives, or the same one with
// another count, datatype, op or root, all get ncclInvalidUsage with a message
// naming the odd rank and both calls, instead of a hang or wrong data.
#include <nccl.h>

#include <string>
#include <vector>

#include "common/mp_harness.h"
#include "common/mp_nccl.h"

namespace {

constexpr int kRanks = 3;
constexpr int kOdd = 1;

mptest::RankOptions options(const char* transport) {
  mptest::RankOptions o = mptest::transportOptions(transport, 60);
  o.env.push_back({"BRAID_CHECK", "1"});
  o.env.push_back({"BRAID_TIMEOUT", "20"});
  return o;
}

using Call = ncclResult_t (*)(int rank, ncclComm_t comm, std::vector<float>& a, std::vector<float>& b);

// Two good collectives first, so the odd call is operation #3; then the odd
// call, which every rank must refuse with a message containing `want`.
void expectRefused(const char* transport, Call call, const std::string& want) {
  mptest::runRanks(
      kRanks,
      [call, want](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        std::vector<float> a(4096 * kRanks, 1.0f), b(4096 * kRanks, 0.0f);
        for (int i = 0; i < 2; ++i)
          MP_NCCL_CHECK(ncclAllReduce(a.data(), b.data(), 64, ncclFloat32, ncclSum, comm, nullptr));
        MP_CHECK(b[0] == static_cast<float>(nranks), "good calls before the odd one give %g", b[0]);
        const ncclResult_t r = call(rank, comm, a, b);
        const std::string message = ncclGetLastError(comm);
        MP_EXPECT(r == ncclInvalidUsage, "rank %d: the mismatched call returned %d (%s): %s", rank,
                  static_cast<int>(r), ncclGetErrorString(r), message.c_str());
        MP_EXPECT(message.find(want) != std::string::npos, "rank %d: message lacks \"%s\": %s", rank, want.c_str(),
                  message.c_str());
        MP_NCCL_CHECK(ncclCommAbort(comm));
      },
      options(transport));
}

class MpCallCheck : public ::testing::TestWithParam<const char*> {};

TEST_P(MpCallCheck, DifferentCollective) {
  expectRefused(
      GetParam(),
      [](int rank, ncclComm_t comm, std::vector<float>& a, std::vector<float>& b) {
        if (rank == kOdd) return ncclAllGather(a.data(), b.data(), 1024, ncclFloat32, comm, nullptr);
        return ncclAllReduce(a.data(), b.data(), 4096, ncclFloat32, ncclSum, comm, nullptr);
      },
      "rank 1 called AllGather(count=1024, float32) as operation #3 while rank 0 called "
      "AllReduce(count=4096, float32, sum)");
}

TEST_P(MpCallCheck, DifferentCountTypeOpOrRoot) {
  expectRefused(
      GetParam(),
      [](int rank, ncclComm_t comm, std::vector<float>& a, std::vector<float>& b) {
        return ncclAllReduce(a.data(), b.data(), rank == kOdd ? 100 : 64, ncclFloat32, ncclSum, comm, nullptr);
      },
      "rank 1 called AllReduce(count=100, float32, sum)");
  expectRefused(
      GetParam(),
      [](int rank, ncclComm_t comm, std::vector<float>& a, std::vector<float>& b) {
        return ncclAllReduce(a.data(), b.data(), 64, rank == kOdd ? ncclInt32 : ncclFloat32, ncclSum, comm, nullptr);
      },
      "rank 1 called AllReduce(count=64, int32, sum)");
  expectRefused(
      GetParam(),
      [](int rank, ncclComm_t comm, std::vector<float>& a, std::vector<float>& b) {
        return ncclAllReduce(a.data(), b.data(), 64, ncclFloat32, rank == kOdd ? ncclMax : ncclSum, comm, nullptr);
      },
      "rank 1 called AllReduce(count=64, float32, max)");
  expectRefused(
      GetParam(),
      [](int rank, ncclComm_t comm, std::vector<float>& a, std::vector<float>& b) {
        return ncclBroadcast(a.data(), b.data(), 64, ncclFloat32, rank == kOdd ? 2 : 0, comm, nullptr);
      },
      "rank 1 called Broadcast(count=64, float32, root 2)");
}

// Send/recv legitimately differ between ranks: the check must let them through.
TEST_P(MpCallCheck, PointToPointAndMatchingCallsPass) {
  mptest::runRanks(
      kRanks,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        std::vector<float> a(64, static_cast<float>(rank)), b(64, -1.0f);
        MP_NCCL_CHECK(ncclGroupStart());
        MP_NCCL_CHECK(ncclSend(a.data(), 64, ncclFloat32, (rank + 1) % nranks, comm, nullptr));
        MP_NCCL_CHECK(ncclRecv(b.data(), 64, ncclFloat32, (rank + nranks - 1) % nranks, comm, nullptr));
        MP_NCCL_CHECK(ncclGroupEnd());
        MP_CHECK(b[0] == static_cast<float>((rank + nranks - 1) % nranks), "recv got %g", b[0]);
        MP_NCCL_CHECK(ncclBroadcast(a.data(), b.data(), 64, ncclFloat32, 2, comm, nullptr));
        MP_CHECK(b[63] == 2.0f, "broadcast got %g", b[63]);
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      options(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Transports, MpCallCheck, ::testing::Values("shm", "tcp"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

}  // namespace
