// src/engine/lanes/plan_cache: prepared groups of calls (a lone call is a
// group of one) kept per shape: each call's communicator, collective, count,
// datatype and root, in order. The cache itself on its own, then through real
// calls on communicators of this process: a repeated shape reruns the same
// prepared lanes on the new calls' buffers, another shape plans anew, and a
// group over several communicators is kept by its first one, rerun only where
// its ranks' peer access is decided alike.
#include <gtest/gtest.h>
#include <nccl.h>

#include <memory>
#include <vector>

#include "common/local_comms.h"
#include "engine/comm.h"
#include "engine/lanes/host_lanes.h"
#include "engine/lanes/plan_cache.h"

namespace braid {
namespace {

using lanes::LaneGroup;

lanes::PlanKey key(schedule::Collective coll, size_t count, ncclDataType_t type = ncclFloat32, int root = 0) {
  lanes::PlanKey k;
  k.coll = coll;
  k.count = count;
  k.type = type;
  k.root = root;
  return k;
}

TEST(PlanCache, FindGivesBackWhatWasInsertedForThatKeyOnly) {
  lanes::PlanCache cache;
  const lanes::PlanKey k = key(schedule::Collective::AllReduce, 1024);
  EXPECT_EQ(cache.find({k}), nullptr);
  auto owned = std::make_unique<LaneGroup>();
  LaneGroup* const group = owned.get();
  EXPECT_EQ(cache.insert({k}, std::move(owned)), group);
  EXPECT_EQ(cache.find({k}), group);
  EXPECT_EQ(cache.find({k}), group) << "a hit must not consume the entry";
}

// Each field of the shape alone makes another plan.
TEST(PlanCache, AShapeDifferingInAnyFieldMisses) {
  lanes::PlanCache cache;
  const lanes::PlanKey k = key(schedule::Collective::Broadcast, 1024, ncclFloat32, 1);
  cache.insert({k}, std::make_unique<LaneGroup>());
  EXPECT_EQ(cache.find({key(schedule::Collective::Reduce, 1024, ncclFloat32, 1)}), nullptr);
  EXPECT_EQ(cache.find({key(schedule::Collective::Broadcast, 1025, ncclFloat32, 1)}), nullptr);
  EXPECT_EQ(cache.find({key(schedule::Collective::Broadcast, 1024, ncclInt32, 1)}), nullptr);
  EXPECT_EQ(cache.find({key(schedule::Collective::Broadcast, 1024, ncclFloat32, 0)}), nullptr);
  EXPECT_NE(cache.find({k}), nullptr);
}

// The buffers, the reduction and the operation number are rebound per call:
// they must not split the cache.
TEST(PlanCache, KeyOfATaskIsItsCommunicatorAndShapeOnly) {
  float a[4], b[4];
  engine::Task t1, t2;
  t1.coll = t2.coll = schedule::Collective::Reduce;
  t1.count = t2.count = 4;
  t1.type = t2.type = ncclFloat16;
  t1.root = t2.root = 2;
  t1.sendbuff = a;
  t1.recvbuff = b;
  t2.sendbuff = b;
  t2.recvbuff = a;
  t1.userOp = ncclSum;
  t2.userOp = ncclMax;
  t2.sequence = 42;
  EXPECT_TRUE(lanes::planKeyOf(t1) == lanes::planKeyOf(t2));
  const lanes::PlanKey k = lanes::planKeyOf(t1);
  EXPECT_EQ(k.coll, schedule::Collective::Reduce);
  EXPECT_EQ(k.count, 4u);
  EXPECT_EQ(k.type, ncclFloat16);
  EXPECT_EQ(k.root, 2);
  t2.root = 1;
  EXPECT_FALSE(lanes::planKeyOf(t1) == lanes::planKeyOf(t2));
}

TEST(PlanCache, FullCacheReplacesTheLeastRecentlyUsed) {
  lanes::PlanCache cache;
  std::vector<LaneGroup*> groups;
  for (size_t i = 0; i < lanes::PlanCache::kEntries; ++i)
    groups.push_back(cache.insert({key(schedule::Collective::AllReduce, i + 1)}, std::make_unique<LaneGroup>()));
  // Entry 0 is the oldest insert but was just used; entry 1 is now the least recent.
  ASSERT_EQ(cache.find({key(schedule::Collective::AllReduce, 1)}), groups[0]);
  LaneGroup* newest = cache.insert({key(schedule::Collective::AllGather, 7)}, std::make_unique<LaneGroup>());
  EXPECT_EQ(cache.find({key(schedule::Collective::AllGather, 7)}), newest);
  EXPECT_EQ(cache.find({key(schedule::Collective::AllReduce, 2)}), nullptr) << "the least recently used entry survived";
  EXPECT_EQ(cache.find({key(schedule::Collective::AllReduce, 1)}), groups[0]) << "a recently used entry was replaced";
  for (size_t i = 2; i < lanes::PlanCache::kEntries; ++i)
    EXPECT_EQ(cache.find({key(schedule::Collective::AllReduce, i + 1)}), groups[i]) << "entry " << i;
}

// The entry found last is tried first (a loop repeats one group), but only
// answers the very same calls: groups that share their first call, and a
// predicate that turns the last entry down, find their own.
TEST(PlanCache, TheLastEntryFoundAnswersOnlyItsOwnCalls) {
  lanes::PlanCache cache;
  const lanes::PlanKey a = key(schedule::Collective::AllReduce, 64), b = key(schedule::Collective::Send, 64, ncclFloat32, 1),
                       c = key(schedule::Collective::Recv, 64, ncclFloat32, 1);
  LaneGroup* ab = cache.insert({a, b}, std::make_unique<LaneGroup>());
  LaneGroup* ac = cache.insert({a, c}, std::make_unique<LaneGroup>());
  LaneGroup* alone = cache.insert({a}, std::make_unique<LaneGroup>());
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(cache.find({a, b}), ab);
    EXPECT_EQ(cache.find({a, c}), ac) << "the last entry (same first call) answered another group";
    EXPECT_EQ(cache.find({a}), alone);
    EXPECT_EQ(cache.find({a, b, c}), nullptr);
  }
  ASSERT_EQ(cache.find({a, b}), ab);
  const std::vector<engine::Task> none;
  EXPECT_EQ(cache.find(none, [](const LaneGroup&) { return true; }), nullptr) << "no calls, no group";
}

// ---- through lone calls on real communicators -------------------------------------

class PlanCacheCalls : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(comms_.ok()) << comms_.error(); }
  // A lone sum all-reduce of `count` floats on every rank at once, each rank
  // adding rank + 1 + base; true when every rank got the right sum.
  bool allReduce(size_t count, float base, std::vector<std::vector<float>>* outs) {
    outs->assign(size_t(comms_.size()), std::vector<float>(count, -1.0f));
    std::vector<std::vector<float>> ins;
    for (int r = 0; r < comms_.size(); ++r) ins.emplace_back(count, float(r + 1) + base);
    std::vector<ncclResult_t> results(size_t(comms_.size()), ncclInternalError);
    comms_.onEveryRank([&](int r) {
      results[size_t(r)] =
          ncclAllReduce(ins[size_t(r)].data(), (*outs)[size_t(r)].data(), count, ncclFloat32, ncclSum, comms_[r], nullptr);
    });
    const float want = 3.0f + 2 * base;  // (1 + base) + (2 + base)
    for (int r = 0; r < comms_.size(); ++r) {
      if (results[size_t(r)] != ncclSuccess) return false;
      for (float v : (*outs)[size_t(r)])
        if (v != want) return false;
    }
    return true;
  }
  LaneGroup* cached(int rank, size_t count) {
    engine::Task t;
    t.comm = comms_[rank];
    t.count = count;
    return lanes::hostLanesOf(comms_[rank]).plans.find({lanes::planKeyOf(t)});
  }
  braidtest::LocalComms comms_{2};
};

TEST_F(PlanCacheCalls, RepeatedCallReusesThePreparedLanesOnItsOwnBuffers) {
  std::vector<std::vector<float>> first, second;
  ASSERT_EQ(cached(0, 1000), nullptr);
  ASSERT_TRUE(allReduce(1000, 0, &first));
  LaneGroup* const group = cached(0, 1000);
  ASSERT_NE(group, nullptr) << "a lone call was not cached";
  ASSERT_TRUE(allReduce(1000, 10, &second)) << "the reused lanes computed a wrong sum";
  EXPECT_EQ(cached(0, 1000), group) << "the repeated call planned again";
  ASSERT_EQ(group->comms.size(), 1u);
  EXPECT_EQ(group->comms[0]->tasks[0].recvbuff, second[0].data()) << "the reused lanes kept the first call's buffer";
  EXPECT_EQ(group->comms[0]->tasks[0].sequence, 2u);
}

TEST_F(PlanCacheCalls, AnotherShapePlansAnewAndKeepsBoth) {
  std::vector<std::vector<float>> out;
  ASSERT_TRUE(allReduce(1000, 0, &out));
  LaneGroup* const thousand = cached(1, 1000);
  ASSERT_TRUE(allReduce(64, 0, &out));
  LaneGroup* const small = cached(1, 64);
  ASSERT_NE(small, nullptr);
  EXPECT_NE(small, thousand);
  EXPECT_EQ(cached(1, 1000), thousand);
  ASSERT_TRUE(allReduce(1000, 1, &out));
  EXPECT_EQ(cached(1, 1000), thousand);
}

// A loop over more shapes than a handful (48 here, where the cache kept 16
// and such a loop planned every call, docs/performance.md) plans each shape
// once: the second pass finds the groups of the first.
TEST_F(PlanCacheCalls, ALoopOverManyShapesPlansEachOnce) {
  constexpr size_t kShapes = 48;
  static_assert(kShapes <= lanes::PlanCache::kEntries);
  std::vector<std::vector<float>> out;
  std::vector<LaneGroup*> firstPass;
  for (size_t k = 0; k < kShapes; ++k) {
    ASSERT_TRUE(allReduce(9 + k, float(k), &out)) << "shape " << k;
    firstPass.push_back(cached(0, 9 + k));
    ASSERT_NE(firstPass.back(), nullptr);
  }
  for (size_t k = 0; k < kShapes; ++k) {
    ASSERT_TRUE(allReduce(9 + k, float(k) + 1, &out)) << "shape " << k << ", second pass";
    EXPECT_EQ(cached(0, 9 + k), firstPass[k]) << "shape " << k << " was planned again";
  }
}

// One thread's group over both ranks (ncclGroupStart, a call on each
// communicator): PreMulSum by `scalars[r]` on rank r, inputs r + 1 + base;
// true when both got the right sum.
bool groupAllReduce(braidtest::LocalComms& comms, size_t n, float base, const float scalars[2],
                    std::vector<std::vector<float>>* out) {
  std::vector<std::vector<float>> in(2);
  out->assign(2, std::vector<float>(n, -1.0f));
  ncclRedOp_t ops[2];
  for (int r = 0; r < 2; ++r) {
    in[size_t(r)].assign(n, float(r + 1) + base);
    float s = scalars[r];
    if (ncclRedOpCreatePreMulSum(&ops[r], &s, ncclFloat32, ncclScalarHostImmediate, comms[r]) != ncclSuccess)
      return false;
  }
  bool ok = ncclGroupStart() == ncclSuccess;
  for (int r = 0; r < 2; ++r)
    ok = ok && ncclAllReduce(in[size_t(r)].data(), (*out)[size_t(r)].data(), n, ncclFloat32, ops[r], comms[r],
                             nullptr) == ncclSuccess;
  ok = ncclGroupEnd() == ncclSuccess && ok;
  for (int r = 0; r < 2; ++r) ncclRedOpDestroy(ops[r], comms[r]);
  const float want = scalars[0] * (1 + base) + scalars[1] * (2 + base);
  for (int r = 0; r < 2 && ok; ++r)
    for (float v : (*out)[size_t(r)]) ok = ok && v == want;
  return ok;
}

// A group over several communicators (one thread driving several ranks) is
// kept by its first call's communicator, under every call (communicators
// included), and rerun on the next group's buffers.
TEST_F(PlanCacheCalls, AGroupOverSeveralCommunicatorsIsCachedByTheFirst) {
  const float ones[2] = {1.0f, 1.0f};
  std::vector<std::vector<float>> out;
  ASSERT_TRUE(groupAllReduce(comms_, 512, 0, ones, &out)) << ncclGetLastError(nullptr);
  engine::Task t;
  t.count = 512;
  t.comm = comms_[0];
  lanes::GroupKey both = {lanes::planKeyOf(t)};
  t.comm = comms_[1];
  both.push_back(lanes::planKeyOf(t));
  LaneGroup* const group = lanes::hostLanesOf(comms_[0]).plans.find(both);
  ASSERT_NE(group, nullptr) << "the group was not kept";
  EXPECT_EQ(group->comms.size(), 2u);
  EXPECT_EQ(group->peerAccess.size(), 2u) << "the whole communicator in one group: peer access";
  EXPECT_EQ(cached(0, 512), nullptr) << "kept as a lone call of rank 0";
  EXPECT_EQ(lanes::hostLanesOf(comms_[1]).plans.find(both), nullptr) << "kept by the second communicator too";
  ASSERT_TRUE(groupAllReduce(comms_, 512, 10, ones, &out)) << "the reused lanes computed a wrong sum";
  EXPECT_EQ(lanes::hostLanesOf(comms_[0]).plans.find(both), group) << "the repeated group planned again";
  EXPECT_EQ(group->comms[1]->tasks[0].recvbuff, out[1].data()) << "the reused lanes kept rank 1's first buffer";
}

// Ranks whose PreMulSum scalars differ may not reduce each other's blocks
// (each lane reduces with its own rank's reduction): the same shapes after a
// peer-access group must plan anew, not rerun it (a wrong sum), and back.
TEST_F(PlanCacheCalls, AKeptGroupIsRerunOnlyForTheSamePeerAccess) {
  const float same[2] = {0.5f, 0.5f}, differ[2] = {2.0f, 0.25f};
  std::vector<std::vector<float>> out;
  ASSERT_TRUE(groupAllReduce(comms_, 1000, 0, same, &out)) << ncclGetLastError(nullptr);
  ASSERT_TRUE(groupAllReduce(comms_, 1000, 1, differ, &out)) << "a peer-access group rerun for other reductions";
  ASSERT_TRUE(groupAllReduce(comms_, 1000, 2, same, &out));
  ASSERT_TRUE(groupAllReduce(comms_, 1000, 3, differ, &out));
}

// A loop's next call on the same buffers only changes its fingerprint in the
// kept lanes; a change of its reduction alone (same buffers: another
// PreMulSum scalar, another op) must still reach them.
TEST_F(PlanCacheCalls, TheSameBuffersWithAnotherReductionReduceAnew) {
  const size_t n = 256;
  std::vector<std::vector<float>> in(2), out(2, std::vector<float>(n));
  for (int r = 0; r < 2; ++r) in[size_t(r)].assign(n, float(r + 1));
  // scalar 0: ncclSum; otherwise PreMulSum by it; ncclMax when max.
  auto run = [&](float scalar, bool max, float want) {
    std::vector<ncclResult_t> results(2, ncclInternalError);
    comms_.onEveryRank([&](int r) {
      ncclRedOp_t op = max ? ncclMax : ncclSum;
      float s = scalar;
      if (scalar != 0) ncclRedOpCreatePreMulSum(&op, &s, ncclFloat32, ncclScalarHostImmediate, comms_[r]);
      results[size_t(r)] =
          ncclAllReduce(in[size_t(r)].data(), out[size_t(r)].data(), n, ncclFloat32, op, comms_[r], nullptr);
      if (scalar != 0) ncclRedOpDestroy(op, comms_[r]);
    });
    for (int r = 0; r < 2; ++r) {
      if (results[size_t(r)] != ncclSuccess) return false;
      for (float v : out[size_t(r)])
        if (v != want) return false;
    }
    return true;
  };
  ASSERT_TRUE(run(0, false, 3.0f));
  ASSERT_TRUE(run(0, false, 3.0f));
  EXPECT_TRUE(run(2.0f, false, 6.0f)) << "a PreMulSum scalar on the same buffers was not rebound";
  EXPECT_TRUE(run(3.0f, false, 9.0f)) << "another scalar on the same buffers was not rebound";
  EXPECT_TRUE(run(0, true, 2.0f)) << "max on the same buffers was not rebound";
  EXPECT_TRUE(run(0, false, 3.0f));
}

// A communicator is named by its address and its nonce: a communicator made
// later at the address of a destroyed one (here: the nonce changed in place)
// never finds the groups that named the old one.
TEST_F(PlanCacheCalls, AnotherCommunicatorAtTheSameAddressMisses) {
  std::vector<std::vector<float>> out;
  ASSERT_TRUE(allReduce(256, 0, &out));
  ASSERT_NE(cached(0, 256), nullptr);
  engine::Task t;
  t.comm = comms_[0];
  const lanes::PlanKey before = lanes::planKeyOf(t);
  comms_[0]->peers[0].nonce ^= 1;
  EXPECT_FALSE(lanes::planKeyOf(t) == before);
  EXPECT_EQ(cached(0, 256), nullptr) << "a group of the old communicator was found";
  comms_[0]->peers[0].nonce ^= 1;
  EXPECT_NE(cached(0, 256), nullptr);
}

// A group of one communicator's calls is cached under all of its calls, in
// order, and a repeated group runs on its own buffers.
TEST_F(PlanCacheCalls, AGroupOfOneCommunicatorsCallsIsCachedWhole) {
  const size_t n = 300;
  auto runGroup = [&](float base, std::vector<std::vector<float>>* sums, std::vector<std::vector<float>>* got) {
    std::vector<std::vector<float>> ins(2);
    sums->assign(2, std::vector<float>(n, -1.0f));
    got->assign(2, std::vector<float>(n, -1.0f));
    std::vector<ncclResult_t> results(2, ncclInternalError);
    comms_.onEveryRank([&](int r) {
      ins[size_t(r)].assign(n, float(r + 1) + base);
      const int peer = 1 - r;
      ncclGroupStart();
      ncclAllReduce(ins[size_t(r)].data(), (*sums)[size_t(r)].data(), n, ncclFloat32, ncclSum, comms_[r], nullptr);
      ncclSend(ins[size_t(r)].data(), n, ncclFloat32, peer, comms_[r], nullptr);
      ncclRecv((*got)[size_t(r)].data(), n, ncclFloat32, peer, comms_[r], nullptr);
      results[size_t(r)] = ncclGroupEnd();
    });
    for (int r = 0; r < 2; ++r) {
      if (results[size_t(r)] != ncclSuccess) return false;
      if ((*sums)[size_t(r)][n - 1] != 3.0f + 2 * base) return false;
      if ((*got)[size_t(r)][n - 1] != float(2 - r) + base) return false;  // the peer's input
    }
    return true;
  };
  auto groupKey = [&](int rank) {
    engine::Task t;
    t.comm = comms_[rank];
    t.count = n;
    t.type = ncclFloat32;
    t.coll = schedule::Collective::AllReduce;
    lanes::GroupKey k = {lanes::planKeyOf(t)};
    t.coll = schedule::Collective::Send;
    t.root = 1 - rank;
    k.push_back(lanes::planKeyOf(t));
    t.coll = schedule::Collective::Recv;
    k.push_back(lanes::planKeyOf(t));
    return k;
  };
  std::vector<std::vector<float>> sums, got;
  ASSERT_TRUE(runGroup(0, &sums, &got));
  LaneGroup* const group = lanes::hostLanesOf(comms_[0]).plans.find(groupKey(0));
  ASSERT_NE(group, nullptr) << "the group was not cached";
  EXPECT_EQ(lanes::hostLanesOf(comms_[0]).plans.find({groupKey(0).front()}), nullptr)
      << "cached under its first call alone";
  ASSERT_TRUE(runGroup(10, &sums, &got)) << "the reused lanes moved the wrong data";
  EXPECT_EQ(lanes::hostLanesOf(comms_[0]).plans.find(groupKey(0)), group) << "the repeated group planned again";
  EXPECT_EQ(group->comms[0]->tasks[2].recvbuff, got[0].data()) << "the reused lanes kept the first group's buffer";
}

}  // namespace
}  // namespace braid
