// src/core/call_check: checkCallsMatch on hand-made task lists, each rank on
// a thread of its own with a real communicator of this process. What
// tests/mp/call_check_test.cc shows through the API (one odd collective,
// count, datatype, op or root; send/recv pass) is not repeated here; these
// cover what the comparison does with the rest of a rank's group: fields a
// collective does not use, point-to-point calls, later calls of a group,
// their order, the operation number, other communicators, and checking off.
#include <gtest/gtest.h>
#include <nccl.h>

#include <functional>
#include <string>
#include <vector>

#include "common/local_comms.h"
#include "core/call_check.h"
#include "engine/comm.h"

namespace braid {
namespace {

using braidtest::LocalComms;

engine::Task call(ncclComm* comm, schedule::Collective coll, size_t count, ncclDataType_t type = ncclFloat32, int op = ncclSum,
          int root = 0) {
  engine::Task t;
  t.comm = comm;
  t.coll = coll;
  t.count = count;
  t.type = type;
  t.userOp = op;
  t.root = root;
  return t;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class CallCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(comms_.ok()) << comms_.error();
    for (int r = 0; r < comms_.size(); ++r) comms_[r]->settings.checkCalls = true;
  }
  // Every rank checks the tasks tasksOf(rank, its communicator) at once, as
  // the ranks of a job do; returns each rank's verdict.
  std::vector<Result> check(const std::function<std::vector<engine::Task>(int, ncclComm*)>& tasksOf) {
    std::vector<Result> results(size_t(comms_.size()));
    comms_.onEveryRank([&](int r) { results[size_t(r)] = core::checkCallsMatch(tasksOf(r, comms_[r])); });
    return results;
  }
  void expectAllPass(const std::vector<Result>& results) {
    for (size_t r = 0; r < results.size(); ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].message();
  }
  // Every rank refuses with ncclInvalidUsage, a message containing `want`
  // and naming the rank that compared.
  void expectAllRefuse(const std::vector<Result>& results, const std::string& want) {
    for (size_t r = 0; r < results.size(); ++r) {
      EXPECT_EQ(results[r].code(), ncclInvalidUsage) << "rank " << r << ": " << results[r].message();
      EXPECT_TRUE(contains(results[r].message(), want)) << "rank " << r << ": " << results[r].message();
      EXPECT_TRUE(contains(results[r].message(), "compared the calls of communicator rank " + std::to_string(r)))
          << results[r].message();
    }
  }
  LocalComms comms_{3};
};

// Without BRAID_CHECK nothing is exchanged: mismatched calls pass, unnumbered.
TEST_F(CallCheck, OffMeansNoComparison) {
  for (int r = 0; r < comms_.size(); ++r) comms_[r]->settings.checkCalls = false;
  expectAllPass(check([](int rank, ncclComm* c) {
    return std::vector<engine::Task>{call(c, schedule::Collective::AllReduce, size_t(rank + 1))};
  }));
  for (int r = 0; r < comms_.size(); ++r) EXPECT_EQ(comms_[r]->collectivesChecked, 0u);
}

TEST_F(CallCheck, MatchingGroupPassesAndCountsItsCollectives) {
  expectAllPass(check([](int rank, ncclComm* c) {
    return std::vector<engine::Task>{call(c, schedule::Collective::AllReduce, 64), call(c, schedule::Collective::Send, 8, ncclInt8, 0, 1),
                             call(c, schedule::Collective::Broadcast, 32, ncclInt32, 0, 2)};
  }));
  for (int r = 0; r < comms_.size(); ++r) EXPECT_EQ(comms_[r]->collectivesChecked, 2u) << "rank " << r;
}

// The op of a collective that reduces nothing, and the root of one without a
// root, are whatever the caller passed: ranks may legitimately differ there.
TEST_F(CallCheck, FieldsACollectiveDoesNotUseAreNotCompared) {
  expectAllPass(check([](int rank, ncclComm* c) {
    return std::vector<engine::Task>{call(c, schedule::Collective::AllGather, 16, ncclFloat32, rank == 1 ? ncclMax : ncclSum),
                             call(c, schedule::Collective::Broadcast, 16, ncclFloat32, rank, 0),
                             call(c, schedule::Collective::AllReduce, 16, ncclFloat32, ncclSum, rank)};
  }));
}

// Send/recv differ between ranks by design, in number and in kind.
TEST_F(CallCheck, PointToPointCallsAreLeftOut) {
  expectAllPass(check([](int rank, ncclComm* c) {
    std::vector<engine::Task> tasks;
    for (int i = 0; i < rank; ++i) tasks.push_back(call(c, schedule::Collective::Recv, size_t(100 * i + 1), ncclUint8, 0, i));
    tasks.push_back(call(c, schedule::Collective::ReduceScatter, 10, ncclFloat64, ncclMin));
    if (rank == 0) tasks.push_back(call(c, schedule::Collective::Send, 5, ncclInt64, 0, 2));
    return tasks;
  }));
}

TEST_F(CallCheck, MismatchInALaterCallOfTheGroupIsCaught) {
  expectAllRefuse(check([](int rank, ncclComm* c) {
                    return std::vector<engine::Task>{call(c, schedule::Collective::AllReduce, 64),
                                             call(c, schedule::Collective::AllGather, rank == 2 ? 9 : 8)};
                  }),
                  "rank 2 called AllReduce(count=64, float32, sum) and 1 more collective(s) in one group as "
                  "operation #1 while rank 0 called AllReduce(count=64, float32, sum) and 1 more collective(s)");
}

TEST_F(CallCheck, TheSameCallsInAnotherOrderAreAMismatch) {
  expectAllRefuse(check([](int rank, ncclComm* c) {
                    engine::Task a = call(c, schedule::Collective::AllReduce, 64), b = call(c, schedule::Collective::Reduce, 64, ncclFloat32, ncclMax, 1);
                    return rank == 1 ? std::vector<engine::Task>{b, a} : std::vector<engine::Task>{a, b};
                  }),
                  "rank 1 called Reduce(count=64, float32, max, root 1) and 1 more");
}

TEST_F(CallCheck, ARankWithOnlyPointToPointCallsIsNamedSo) {
  expectAllRefuse(check([](int rank, ncclComm* c) {
                    if (rank == 1) return std::vector<engine::Task>{call(c, schedule::Collective::Send, 8, ncclInt8, 0, 0)};
                    return std::vector<engine::Task>{call(c, schedule::Collective::Broadcast, 8, ncclInt8, 0, 1)};
                  }),
                  "rank 1 called no collective (only point-to-point calls, or none) as operation #1 while rank 0 "
                  "called Broadcast(count=8, int8, root 1)");
}

// The number in the message is the first collective of the odd group,
// counting the collectives every earlier check let through.
TEST_F(CallCheck, OperationNumberCountsEarlierCheckedCollectives) {
  expectAllPass(check([](int, ncclComm* c) {
    return std::vector<engine::Task>{call(c, schedule::Collective::AllReduce, 1), call(c, schedule::Collective::AllReduce, 2),
                             call(c, schedule::Collective::AllToAll, 3)};
  }));
  expectAllRefuse(check([](int rank, ncclComm* c) {
                    return std::vector<engine::Task>{call(c, schedule::Collective::Gather, 4, ncclBfloat16, 0, rank == 0 ? 0 : 2)};
                  }),
                  "rank 1 called Gather(count=4, bfloat16, root 2) as operation #4 while rank 0 called Gather(count=4, "
                  "bfloat16, root 0)");
}

TEST_F(CallCheck, UserDefinedOpIsNamedByItsNumber) {
  const int premulsum = int(ncclNumOps) + 1;
  expectAllRefuse(check([premulsum](int rank, ncclComm* c) {
                    return std::vector<engine::Task>{call(c, schedule::Collective::AllReduce, 8, ncclFloat32, rank == 2 ? premulsum : ncclSum)};
                  }),
                  "rank 2 called AllReduce(count=8, float32, PreMulSum op " + std::to_string(premulsum) + ")");
}

// A group may span communicators: each is compared on its own calls only.
TEST_F(CallCheck, CallsOfAnotherCommunicatorAreNotMixedIn) {
  LocalComms other(3);
  ASSERT_TRUE(other.ok()) << other.error();
  expectAllPass(check([&other](int rank, ncclComm* c) {
    return std::vector<engine::Task>{call(other[rank], schedule::Collective::AllReduce, size_t(rank + 1)),
                             call(c, schedule::Collective::AllReduce, 64)};
  }));
  EXPECT_EQ(other[0]->collectivesChecked, 0u);
}

// ncclCommInitAll lets one thread drive every rank of a job through one
// group: the check must then compare the ranks together, not one after
// another (each rank's exchange waits for the others').
TEST_F(CallCheck, OneThreadCheckingEveryRankOfAJob) {
  std::vector<engine::Task> tasks;
  for (int r = 0; r < comms_.size(); ++r) tasks.push_back(call(comms_[r], schedule::Collective::AllReduce, r == 1 ? 65 : 64));
  Result r = core::checkCallsMatch(tasks);
  EXPECT_EQ(r.code(), ncclInvalidUsage) << r.message();
  EXPECT_TRUE(contains(r.message(), "rank 1 called AllReduce(count=65, float32, sum)")) << r.message();
  tasks[1].count = 64;
  r = core::checkCallsMatch(tasks);
  EXPECT_TRUE(r.ok()) << r.message();
}

}  // namespace
}  // namespace braid
