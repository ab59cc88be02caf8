// src/core/group: ncclGroupStart/End nesting, tasks held until the outermost
// End, the first error of a call inside a group, deferred communicator
// creation, and what a failed or aborted group leaves behind. Real
// communicators of one job in this process (inproc transport), driven from
// the test thread, which one group lets run every rank at once.
#include <gtest/gtest.h>
#include <nccl.h>

#include <string>
#include <vector>

#include "common/local_comms.h"
#include "core/group.h"
#include "engine/comm.h"
#include "reduce/host_reduce.h"

namespace braid {
namespace {

using braidtest::LocalComms;

constexpr size_t kCount = 256;
constexpr float kUnwritten = -7.0f;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Rank r contributes r + 1 to a sum all-reduce; each rank's output starts unwritten.
struct SumBuffers {
  explicit SumBuffers(int nranks) {
    for (int r = 0; r < nranks; ++r) {
      in.emplace_back(kCount, float(r + 1));
      out.emplace_back(kCount, kUnwritten);
    }
  }
  float expected() const { return float(in.size() * (in.size() + 1) / 2); }
  bool allEqual(float v) const {
    for (const auto& o : out)
      for (float x : o)
        if (x != v) return false;
    return true;
  }
  std::vector<std::vector<float>> in, out;
};

engine::Task sumTask(ncclComm* comm, SumBuffers& b) {
  engine::Task t;
  t.comm = comm;
  t.coll = schedule::Collective::AllReduce;
  t.sendbuff = b.in[size_t(comm->rank)].data();
  t.recvbuff = b.out[size_t(comm->rank)].data();
  t.count = kCount;
  t.type = ncclFloat32;
  t.op = reduce::makeBuiltinOp(ncclSum, ncclFloat32, comm->nranks);
  t.userOp = ncclSum;
  return t;
}

class Group : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(comms_.ok()) << comms_.error(); }
  void TearDown() override {
    // A test that failed half-way must not leave this thread inside a group;
    // its tasks point at buffers gone by now, so they are dropped, not run.
    float ignored = 0;
    while (core::inGroup()) (void)core::groupSimulateEnd(&ignored);
  }
  // Enqueues a sum all-reduce on every rank (inside the caller's group).
  void enqueueOnEveryRank(SumBuffers* b) {
    for (int r = 0; r < comms_.size(); ++r) ASSERT_TRUE(core::enqueueTask(sumTask(comms_[r], *b)).ok());
  }
  LocalComms comms_{2};
};

TEST_F(Group, EndWithoutStartIsInvalidUsageNamingTheCall) {
  ASSERT_FALSE(core::inGroup());
  Result r = core::groupEnd();
  EXPECT_EQ(r.code(), ncclInvalidUsage);
  EXPECT_TRUE(contains(r.message(), "ncclGroupEnd called without a matching ncclGroupStart")) << r.message();
  float micros = -1;
  r = core::groupSimulateEnd(&micros);
  EXPECT_EQ(r.code(), ncclInvalidUsage);
  EXPECT_TRUE(contains(r.message(), "ncclGroupSimulateEnd")) << r.message();
}

// Nothing may run before the outermost End: a rank's peers may not have
// enqueued their side yet.
TEST_F(Group, TasksWaitForTheOutermostEnd) {
  SumBuffers b(comms_.size());
  core::groupStart();
  core::groupStart();
  EXPECT_TRUE(core::inGroup());
  enqueueOnEveryRank(&b);
  ASSERT_TRUE(core::groupEnd().ok());
  EXPECT_TRUE(core::inGroup()) << "the inner End closed the outer group";
  EXPECT_TRUE(b.allEqual(kUnwritten)) << "a task ran at the inner End";
  EXPECT_EQ(comms_[0]->opCount, 0u);
  Result r = core::groupEnd();
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_FALSE(core::inGroup());
  EXPECT_TRUE(b.allEqual(b.expected()));
  EXPECT_EQ(comms_[0]->opCount, 1u);
  EXPECT_EQ(comms_[1]->opCount, 1u);
}

TEST_F(Group, SeveralTasksPerCommunicatorRunInOneGroup) {
  SumBuffers first(comms_.size()), second(comms_.size());
  core::groupStart();
  enqueueOnEveryRank(&first);
  enqueueOnEveryRank(&second);
  Result r = core::groupEnd();
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(first.allEqual(first.expected()));
  EXPECT_TRUE(second.allEqual(second.expected()));
  EXPECT_EQ(comms_[0]->opCount, 2u) << "each task is numbered once when the group runs";
}

// A bad call inside a group must not let the rest of the group run half of
// the user's operations: the group fails at End with the first error, runs
// nothing, and leaves both the thread and the communicators usable.
TEST_F(Group, FirstErrorInsideAGroupFailsTheEndAndNothingRuns) {
  SumBuffers b(comms_.size());
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < comms_.size(); ++r)
    ASSERT_EQ(ncclAllReduce(b.in[r].data(), b.out[r].data(), kCount, ncclFloat32, ncclSum, comms_[r], nullptr),
              ncclSuccess);
  EXPECT_EQ(ncclAllReduce(b.in[0].data(), b.out[0].data(), kCount, ncclDataType_t(99), ncclSum, comms_[0], nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclBroadcast(b.in[1].data(), b.out[1].data(), kCount, ncclFloat32, 5, comms_[1], nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  const std::string message = ncclGetLastError(nullptr);
  EXPECT_TRUE(contains(message, "datatype 99")) << "not the first error: " << message;
  EXPECT_TRUE(b.allEqual(kUnwritten)) << "a valid call of the failed group ran";
  EXPECT_EQ(comms_[0]->opCount, 0u);
  EXPECT_FALSE(core::inGroup());
  EXPECT_EQ(core::groupEnd().code(), ncclInvalidUsage) << "the failed End left a group open";

  ncclResult_t async = ncclInProgress;
  ASSERT_EQ(ncclCommGetAsyncError(comms_[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess) << "an argument error poisoned the communicator";
  core::groupStart();
  enqueueOnEveryRank(&b);
  Result r = core::groupEnd();
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(b.allEqual(b.expected()));
}

TEST_F(Group, FailOutsideAGroupIsForgotten) {
  core::groupFail(fail(ncclInvalidArgument, "a lone call's own error"));
  SumBuffers b(comms_.size());
  core::groupStart();
  enqueueOnEveryRank(&b);
  Result r = core::groupEnd();
  EXPECT_TRUE(r.ok()) << "a lone call's error reached a later group: " << r.message();
}

TEST_F(Group, SimulateEndDropsTheTasksAndEstimatesTheBusiestCommunicator) {
  SumBuffers b(comms_.size());
  float one = 0, both = 0, twoOnOne = 0;
  core::groupStart();
  ASSERT_TRUE(core::enqueueTask(sumTask(comms_[0], b)).ok());
  ASSERT_TRUE(core::groupSimulateEnd(&one).ok());
  core::groupStart();
  enqueueOnEveryRank(&b);
  ASSERT_TRUE(core::groupSimulateEnd(&both).ok());
  core::groupStart();
  ASSERT_TRUE(core::enqueueTask(sumTask(comms_[0], b)).ok());
  ASSERT_TRUE(core::enqueueTask(sumTask(comms_[0], b)).ok());
  ASSERT_TRUE(core::groupSimulateEnd(&twoOnOne).ok());
  EXPECT_FALSE(core::inGroup());
  EXPECT_TRUE(b.allEqual(kUnwritten)) << "a simulated task ran";
  EXPECT_EQ(comms_[0]->opCount, 0u);
  ASSERT_GT(one, 0.0f);
  // Communicators run concurrently (the longest counts), a communicator's tasks one after another.
  EXPECT_FLOAT_EQ(both, one);
  EXPECT_FLOAT_EQ(twoOnOne, 2 * one);
}

// ncclCommAbort from another thread sets the flag: a group that starts after
// it must not touch the communicator's connections.
TEST_F(Group, AbortedCommunicatorFailsTheGroupWithoutRunningIt) {
  SumBuffers b(comms_.size());
  comms_[1]->abortFlag = 1;
  core::groupStart();
  enqueueOnEveryRank(&b);
  Result r = core::groupEnd();
  comms_[1]->abortFlag = 0;
  EXPECT_EQ(r.code(), ncclSystemError);
  EXPECT_TRUE(contains(r.message(), "aborted")) << r.message();
  EXPECT_TRUE(b.allEqual(kUnwritten));
  EXPECT_EQ(comms_[0]->activeCalls.load(), 0) << "the group left its communicators marked busy";
  EXPECT_EQ(comms_[1]->activeCalls.load(), 0);
}

// A group whose run fails marks every communicator of the group failed.
TEST_F(Group, FailedRunMarksEveryCommunicatorOfTheGroup) {
  // BRAID_CHECK refuses mismatched calls after the group started running.
  for (int r = 0; r < comms_.size(); ++r) comms_[r]->settings.checkCalls = true;
  SumBuffers b(comms_.size());
  core::groupStart();
  ASSERT_TRUE(core::enqueueTask(sumTask(comms_[0], b)).ok());
  engine::Task odd = sumTask(comms_[1], b);
  odd.count = kCount / 2;
  ASSERT_TRUE(core::enqueueTask(odd).ok());
  Result r = core::groupEnd();
  EXPECT_EQ(r.code(), ncclInvalidUsage);
  EXPECT_TRUE(contains(r.message(), "rank 1 called AllReduce(count=128")) << r.message();
  for (int rank = 0; rank < comms_.size(); ++rank) {
    ncclResult_t async = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comms_[rank], &async), ncclSuccess);
    EXPECT_EQ(async, ncclInvalidUsage) << "rank " << rank;
  }
  EXPECT_TRUE(b.allEqual(kUnwritten));
}

// A lone call is a group of one: it has run when enqueueTask returns. Two
// ranks of one job need two threads for that.
TEST_F(Group, LoneTaskRunsAtOnce) {
  SumBuffers b(comms_.size());
  std::vector<Result> results(size_t(comms_.size()));
  comms_.onEveryRank([&](int rank) {
    results[size_t(rank)] = core::enqueueTask(sumTask(comms_[rank], b));
    EXPECT_FALSE(core::inGroup());
  });
  for (const Result& r : results) EXPECT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(b.allEqual(b.expected()));
}

// ncclCommInitRank of every rank from one thread works only because the
// group defers the inits to its End and runs them together.
TEST(GroupInit, InitsRunTogetherAtTheEnd) {
  braidtest::ScopedEnv env(std::vector<std::pair<std::string, std::string>>{{"BRAID_TIMEOUT", "10"}});
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t c[3] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 3; ++r) ASSERT_EQ(ncclCommInitRank(&c[r], 3, id, r), ncclSuccess);
  EXPECT_EQ(c[0]->currentState(), engine::CommState::Initializing) << "an init ran before the End";
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(c[r]->currentState(), engine::CommState::Ready);
    EXPECT_EQ(c[r]->rank, r);
    EXPECT_EQ(int(c[r]->peers.size()), 3);
  }
  for (ncclComm_t comm : c) ncclCommDestroy(comm);
}

TEST(GroupInit, BadInitInAGroupFailsTheEndAndRunsNoInit) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t good = nullptr, bad = nullptr;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&good, 2, id, 0), ncclSuccess);
  EXPECT_EQ(ncclCommInitRank(&bad, 2, id, 5), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_TRUE(contains(ncclGetLastError(nullptr), "rank 5 is out of range for 2 ranks")) << ncclGetLastError(nullptr);
  // The valid rank's init was dropped with the group: it never waited for its missing peer.
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(good->currentState(), engine::CommState::Initializing);
  EXPECT_FALSE(core::inGroup());
  ncclCommDestroy(good);
}

}  // namespace
}  // namespace braid
