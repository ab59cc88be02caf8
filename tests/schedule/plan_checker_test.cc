#include "plan_checker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <vector>

#include "schedule/double_tree.h"
#include "schedule/exchange.h"

namespace braid {
namespace {

const schedule::Collective kCollectives[] = {
    schedule::Collective::AllReduce, schedule::Collective::ReduceScatter, schedule::Collective::AllGather, schedule::Collective::Broadcast,
    schedule::Collective::Reduce,    schedule::Collective::AllToAll,      schedule::Collective::Gather,    schedule::Collective::Scatter,
};
const schedule::Algorithm kAlgorithms[] = {schedule::Algorithm::Ring, schedule::Algorithm::Tree, schedule::Algorithm::RecursiveDoubling,
                                 schedule::Algorithm::HalvingDoubling, schedule::Algorithm::Direct,
                                 schedule::Algorithm::PeerAccess};

struct Schedule {
  schedule::Algorithm algo;
  schedule::Collective coll;
};

// Every (algorithm, collective) pair that has a schedule.
std::vector<Schedule> allSchedules() {
  std::vector<Schedule> out;
  for (schedule::Algorithm a : kAlgorithms)
    for (schedule::Collective c : kCollectives)
      if (algorithmSupports(a, c)) out.push_back({a, c});
  return out;
}

bool rooted(schedule::Collective c) {
  return c == schedule::Collective::Broadcast || c == schedule::Collective::Reduce || c == schedule::Collective::Gather ||
         c == schedule::Collective::Scatter;
}

// Total elements a rank's buffers hold grows with p*count for these.
bool quadratic(schedule::Collective c) {
  return c == schedule::Collective::AllGather || c == schedule::Collective::ReduceScatter || c == schedule::Collective::AllToAll;
}

schedule::CollShape shape(Schedule sc, int nranks, size_t count, int root, size_t chunk, int channels) {
  schedule::CollShape s;
  s.coll = sc.coll;
  s.algorithm = sc.algo;
  s.nranks = nranks;
  s.count = count;
  s.root = root;
  s.chunkElems = chunk;
  s.nchannels = channels;
  return s;
}

struct Setting {
  size_t count, chunk;
  int channels;
};

void checkAll(Schedule sc, int p, const std::vector<Setting>& settings, const std::vector<int>& roots,
              bool inPlaceToo, bool lifo = false) {
  // Peer access serves the ranks of one process on one GPU: its checker
  // takes up to 64 (checkPeerAccessPlans).
  if (sc.algo == schedule::Algorithm::PeerAccess && p > 64) return;
  for (const Setting& st : settings)
    for (int root : roots) {
      if (!rooted(sc.coll) && root != roots.front()) continue;
      for (int inPlace = 0; inPlace <= (inPlaceToo ? 1 : 0); ++inPlace) {
        CheckOptions opts;
        opts.inPlace = inPlace != 0;
        opts.lifo = lifo;
        std::string err = checkCollective(shape(sc, p, st.count, root, st.chunk, st.channels), opts);
        ASSERT_EQ(err, "") << err;
      }
    }
}

TEST(PlanChecker, EveryScheduleUpTo16Ranks) {
  for (Schedule sc : allSchedules())
    for (int p = 1; p <= 16; ++p) {
      const std::vector<Setting> settings = {
          {1, 1, 1}, {7, 3, 1}, {13, 1, 2}, {64, 16, 3}, {size_t(2 * p + 5), 2, 4}, {40, 64, 2}, {9, 2, 32},
      };
      checkAll(sc, p, settings, {0, p / 2, p - 1}, true);
      if (HasFatalFailure()) return;
    }
}

TEST(PlanChecker, EveryScheduleUpTo64Ranks) {
  for (Schedule sc : allSchedules())
    for (int p = 17; p <= 64; ++p) {
      const std::vector<Setting> settings =
          quadratic(sc.coll) ? std::vector<Setting>{{3, 1, 1}, {5, 2, 2}, {17, 4, 1}}
                             : std::vector<Setting>{{3, 1, 1}, {size_t(2 * p + 1), 4, 2}, {100, 8, 1}};
      checkAll(sc, p, settings, {p / 3}, p % 2 == 0);
      if (HasFatalFailure()) return;
    }
}

// Under a wire type, halving-doubling allreduce starts every step at a
// multiple of the wire's group (CollShape::align): a finished value re-sent in
// another piece then narrows as its owner's did. The plans stay correct, and
// every step's offset is aligned (its end too, unless it is the call's end).
TEST(PlanChecker, HalvingDoublingAllReduceAlignedToWireGroups) {
  const Schedule hd{schedule::Algorithm::HalvingDoubling, schedule::Collective::AllReduce};
  for (int p = 1; p <= 12; ++p)
    for (const Setting& st : std::vector<Setting>{{1031, 100, 1}, {1031, 64, 3}, {96, 40, 4}, {31, 32, 2},
                                                  {5000, 300, 4}, {33 * 32 + 5, 32, 2}}) {
      schedule::CollShape s = shape(hd, p, st.count, 0, st.chunk, st.channels);
      s.align = 32;
      ASSERT_EQ(checkCollective(s, CheckOptions{}), "") << p << " ranks, count " << st.count;
      for (int r = 0; r < p; ++r) {
        s.rank = r;
        const schedule::Plan plan = schedule::generatePlan(s);
        for (const schedule::Lane& lane : plan.lanes)
          for (const schedule::Step& step : lane.steps) {
            for (const schedule::BufferRef& ref : {step.src, step.dst}) {
              if (ref.buffer == schedule::Buffer::Scratch) continue;
              EXPECT_EQ(ref.offset % 32, 0u) << p << " ranks, rank " << r << ", count " << st.count;
            }
            const size_t end = (step.kind == schedule::StepKind::Send ? step.src : step.dst).offset + step.count;
            EXPECT_TRUE(end % 32 == 0 || end == st.count) << p << " ranks, rank " << r << ", count " << st.count;
          }
      }
    }
}

// Under a wire type that narrows, recursive doubling's partners must add the
// same two values: every step that stores a value keeps the widened narrowing
// (Step::keepsWire), and no core rank sends its raw input (it sends the
// narrowed copy in its output), so what a rank adds of its own is what its
// partner received. The plans stay correct; without a wire nothing changes.
TEST(PlanChecker, RecursiveDoublingAllReduceKeepsWhatItSendsUnderAWire) {
  const Schedule rd{schedule::Algorithm::RecursiveDoubling, schedule::Collective::AllReduce};
  for (int p = 2; p <= 12; ++p)
    for (const Setting& st : std::vector<Setting>{{1031, 100, 1}, {96, 40, 2}, {5000, 300, 3}})
      for (bool wire : {false, true}) {
        schedule::CollShape s = shape(rd, p, st.count, 0, st.chunk, st.channels);
        s.narrowWire = wire;
        ASSERT_EQ(checkCollective(s, CheckOptions{}), "") << p << " ranks, wire " << wire;
        const int core = 1 << int(std::log2(double(p)));
        for (int r = 0; r < p; ++r) {
          s.rank = r;
          for (const schedule::Lane& lane : schedule::generatePlan(s).lanes)
            for (const schedule::Step& step : lane.steps) {
              const bool stores = schedule::stepWritesDst(step.kind) && step.kind != schedule::StepKind::Recv;
              EXPECT_EQ(step.keepsWire, wire && stores) << p << " ranks, rank " << r << ", " << stepKindName(step.kind);
              if (wire && r < core && step.kind == schedule::StepKind::Send)
                EXPECT_EQ(step.src.buffer, schedule::Buffer::Output) << p << " ranks, rank " << r;
            }
        }
      }
}

// Ranks placed on hosts in every way: round robin over h hosts, and a
// shuffled placement. Rings and trees then run over host-contiguous positions.
std::vector<std::vector<uint64_t>> placements(int p) {
  std::vector<std::vector<uint64_t>> out;
  for (int hosts = 2; hosts <= std::min(p, 4); ++hosts) {
    std::vector<uint64_t> roundRobin(p);
    for (int r = 0; r < p; ++r) roundRobin[r] = 1000 + r % hosts;
    out.push_back(roundRobin);
  }
  std::vector<uint64_t> shuffled(p);
  uint64_t x = 0x9e3779b97f4a7c15ull * (p + 1);
  for (int r = 0; r < p; ++r) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    shuffled[r] = x % 3;
  }
  out.push_back(shuffled);
  return out;
}

TEST(PlanChecker, EveryScheduleOverHostOrderedRanks) {
  for (Schedule sc : allSchedules())
    for (int p = 2; p <= 24; ++p)
      for (const std::vector<uint64_t>& hosts : placements(p)) {
        const schedule::RankOrder order = schedule::hostContiguousOrder(hosts);
        for (const Setting& st : std::vector<Setting>{{1, 1, 1}, {7, 3, 1}, {size_t(2 * p + 5), 2, 3}})
          for (int root : {0, p / 2, p - 1})
            for (bool inPlace : {false, true}) {
              if (!rooted(sc.coll) && root != 0) continue;
              schedule::CollShape s = shape(sc, p, st.count, root, st.chunk, st.channels);
              s.order = &order;
              CheckOptions opts;
              opts.inPlace = inPlace;
              const std::string err = checkCollective(s, opts);
              ASSERT_EQ(err, "") << err;
            }
      }
}

// The same plans run in another interleaving of lanes (depth first).
TEST(PlanChecker, OtherLaneInterleaving) {
  for (Schedule sc : allSchedules())
    for (int p : {2, 3, 5, 6, 8, 13}) {
      checkAll(sc, p, {{23, 2, 1}, {50, 4, 4}}, {0, p - 1}, true, /*lifo=*/true);
      if (HasFatalFailure()) return;
    }
}

void checkLarge(int p) {
  for (Schedule sc : allSchedules()) {
    std::vector<Setting> settings = {{1, 4, 1}};
    if (!quadratic(sc.coll)) {
      settings.push_back({3, 1, 2});
      settings.push_back({size_t(p) / 4 + 5, size_t(p) / 16, 2});
    } else if (p < 1000) {
      settings.push_back({3, 1, 2});  // two channels, one with two chunks per block
    }
    checkAll(sc, p, settings, {p / 3}, false);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(PlanChecker, Ranks127To256) {
  for (int p : {127, 128, 255, 256}) {
    checkLarge(p);
    if (HasFatalFailure()) return;
  }
}

TEST(PlanChecker, Ranks1000) { checkLarge(1000); }
TEST(PlanChecker, Ranks1024) { checkLarge(1024); }

// At 4096 ranks every schedule. All-gather, reduce-scatter and all-to-all
// hold p*count elements per rank and move p^2*count in all (16.7M messages at
// count 1), so they run with one element per block on one channel, and only
// the ring all-gather, the cheapest of them, also with two channels and two
// chunks per block; the other settings of those are checked up to 1024 ranks.
TEST(PlanChecker, Ranks4096) {
  const int p = 4096;
  for (Schedule sc : allSchedules()) {
    if (quadratic(sc.coll)) {
      checkAll(sc, p, {{1, 1, 1}}, {0}, false);
      if (HasFatalFailure()) return;
      if (sc.algo == schedule::Algorithm::Ring && sc.coll == schedule::Collective::AllGather) checkAll(sc, p, {{3, 1, 2}}, {0}, false);
      if (HasFatalFailure()) return;
      continue;
    }
    checkAll(sc, p, {{3, 1, 1}}, {p - 1}, false);
    if (HasFatalFailure()) return;
    // Several chunks and channels (the ring allreduce generator alone costs
    // O(p) per rank and call, so it gets only the one setting).
    if (!(sc.algo == schedule::Algorithm::Ring && sc.coll == schedule::Collective::AllReduce))
      checkAll(sc, p, {{67, 16, 2}}, {17}, false);
    if (HasFatalFailure()) return;
  }
}

TEST(PlanChecker, OneSlotFifoDeadlocks) {
  // The executor needs two slots: a step holds a received slot and a send slot.
  CheckOptions oneSlot;
  oneSlot.nslots = 1;
  EXPECT_NE(checkCollective(shape({schedule::Algorithm::Ring, schedule::Collective::AllReduce}, 2, 40, 0, 3, 1), oneSlot), "");
}

TEST(Schedules, UnsupportedAlgorithmFallsBackToRing) {
  for (schedule::Algorithm a : kAlgorithms)
    for (schedule::Collective c : {schedule::Collective::AllReduce, schedule::Collective::ReduceScatter, schedule::Collective::AllGather,
                         schedule::Collective::Broadcast, schedule::Collective::Reduce}) {
      if (algorithmSupports(a, c)) continue;
      schedule::CollShape s = shape({a, c}, 6, 50, 2, 4, 2);
      schedule::CollShape ring = s;
      ring.algorithm = schedule::Algorithm::Ring;
      s.rank = ring.rank = 3;
      EXPECT_EQ(describePlan(generatePlan(s)), describePlan(generatePlan(ring)));
    }
  EXPECT_TRUE(algorithmSupports(schedule::Algorithm::Tree, schedule::Collective::AllReduce));
  EXPECT_FALSE(algorithmSupports(schedule::Algorithm::Tree, schedule::Collective::AllGather));
  EXPECT_TRUE(algorithmSupports(schedule::Algorithm::HalvingDoubling, schedule::Collective::ReduceScatter));
  EXPECT_TRUE(algorithmSupports(schedule::Algorithm::Direct, schedule::Collective::Send));
}

// Step counts the cost model (docs/algorithms.md) relies on: one chunk of data.
TEST(Schedules, StepCountsMatchTheDocumentedFormulas) {
  auto stepsOf = [](schedule::Algorithm a, schedule::Collective c, int p, int rank, size_t count) {
    schedule::CollShape s = shape({a, c}, p, count, 0, size_t(1) << 20, 1);
    s.rank = rank;
    size_t n = 0;
    for (const schedule::Lane& l : generatePlan(s).lanes) n += l.steps.size();
    return n;
  };
  // Recursive doubling, p = 2^k: one send, then one receive-reduce per round.
  EXPECT_EQ(stepsOf(schedule::Algorithm::RecursiveDoubling, schedule::Collective::AllReduce, 16, 5, 8), 4u + 1);
  // Non-power of two: an extra rank sends and receives; its partner's first
  // step also folds.
  EXPECT_EQ(stepsOf(schedule::Algorithm::RecursiveDoubling, schedule::Collective::AllReduce, 12, 9, 8), 2u);
  EXPECT_EQ(stepsOf(schedule::Algorithm::RecursiveDoubling, schedule::Collective::AllReduce, 12, 1, 8), 3u + 1);
  // Halving-doubling with p = 2^k and a count of p blocks: log2(p) halving and
  // log2(p) doubling rounds, each a send and a receive.
  EXPECT_EQ(stepsOf(schedule::Algorithm::HalvingDoubling, schedule::Collective::AllReduce, 8, 3, 64), 2u * 2 * 3);
  // Bruck all-gather on 6 ranks: ceil(log2 6) = 3 rounds of send + receive,
  // plus the local copy (rank 0: no round's blocks wrap around the end).
  EXPECT_EQ(stepsOf(schedule::Algorithm::RecursiveDoubling, schedule::Collective::AllGather, 6, 0, 1), 3u * 2 + 1);
  // Ring allreduce: a send, then 2(p-1) - 1 receiving steps.
  EXPECT_EQ(stepsOf(schedule::Algorithm::Ring, schedule::Collective::AllReduce, 8, 3, 64), 2u * 7 + 1);
  // Double binary tree allreduce, one chunk, so a single tree: leaves send and
  // receive, a node with two children receives twice, sends once, then
  // receives once and sends twice; the root receives twice and sends twice.
  EXPECT_EQ(stepsOf(schedule::Algorithm::Tree, schedule::Collective::AllReduce, 7, 0, 4), 2u);
  EXPECT_EQ(stepsOf(schedule::Algorithm::Tree, schedule::Collective::AllReduce, 7, 1, 4), 4u);
  EXPECT_EQ(stepsOf(schedule::Algorithm::Tree, schedule::Collective::AllReduce, 7, 3, 4), 3u);
}

// The alpha terms of docs/algorithms.md: the checker's critical path (message
// latencies on the longest chain) for count = k chunks, one channel.
size_t criticalPath(schedule::Algorithm a, schedule::Collective c, int p, size_t k, size_t chunk = 4) {
  CheckStats st;
  schedule::CollShape s = shape({a, c}, p, k * chunk, 0, chunk, 1);
  EXPECT_EQ(checkCollective(s, {}, &st), "");
  return st.criticalPathSteps;
}

int floorLog2(int x) { return static_cast<int>(std::floor(std::log2(x))); }

TEST(Schedules, CriticalPathsMatchTheDocumentedFormulas) {
  for (int p = 2; p <= 40; ++p)
    for (size_t k : {1, 2, 3, 7}) {
      SCOPED_TRACE("p=" + std::to_string(p) + " k=" + std::to_string(k));
      const int P = 1 << floorLog2(p), m = floorLog2(p), f = p != P;
      const size_t kt = (k + 1) / 2;  // chunks per tree (both trees used from two chunks on)
      auto pieces = [&](size_t elems) { return (elems + 3) / 4; };  // chunk = 4 elements
      // Ring: 2(p-1) per slice of p chunks; a ring reduce-scatter chunk takes p-1.
      EXPECT_EQ(criticalPath(schedule::Algorithm::Ring, schedule::Collective::AllReduce, p, k), 2 * (p - 1) * ((k + p - 1) / p));
      EXPECT_EQ(criticalPath(schedule::Algorithm::Ring, schedule::Collective::ReduceScatter, p, k), (p - 1) * k);
      EXPECT_EQ(criticalPath(schedule::Algorithm::Ring, schedule::Collective::Broadcast, p, k), p - 2 + k);
      // Double binary tree, D = floor(log2 p); rooted: Dr = 1 + floor(log2(p-1)).
      const int D = floorLog2(p), Dr = 1 + floorLog2(p - 1);
      const size_t treeAR = criticalPath(schedule::Algorithm::Tree, schedule::Collective::AllReduce, p, k);
      if (p == 2) {
        EXPECT_EQ(treeAR, 2 + (kt - 1));
      } else if (!f) {
        EXPECT_EQ(treeAR, 3 * D - 1 + 2 * (kt - 1));
      } else {
        EXPECT_LE(treeAR, 3 * D + 2 * (kt - 1));
      }
      EXPECT_EQ(criticalPath(schedule::Algorithm::Tree, schedule::Collective::Broadcast, p, k), Dr + kt - 1);
      EXPECT_LE(criticalPath(schedule::Algorithm::Tree, schedule::Collective::Reduce, p, k),
                p < 4 ? Dr + kt - 1 : 2 * Dr - 1 + 2 * (kt - 1));
      // Recursive doubling allreduce: m per chunk; with a fold m+1 per chunk, +1.
      EXPECT_EQ(criticalPath(schedule::Algorithm::RecursiveDoubling, schedule::Collective::AllReduce, p, k),
                f ? (m + 1) * k + 1 : m * k);
      // Halving-doubling allreduce (n = 4k elements in P blocks): each round's
      // half, twice; exact when the blocks are equal, at most otherwise.
      size_t hd = 0;
      for (int i = 1; i <= m; ++i) hd += 2 * pieces((4 * k + (1 << i) - 1) >> i);
      hd += f ? 2 * k : 0;
      const size_t hdGot = criticalPath(schedule::Algorithm::HalvingDoubling, schedule::Collective::AllReduce, p, k);
      if ((4 * k) % P == 0) {
        EXPECT_EQ(hdGot, hd);
      } else {
        EXPECT_LE(hdGot, hd);
      }
      // Per-rank block of k chunks: recursive doubling / Bruck all-gather and
      // halving reduce-scatter.
      size_t ag = 0;
      for (int d = 1; d < p; d *= 2) ag += std::min(d, p - d) * k + (f ? 1 : 0);
      EXPECT_LE(criticalPath(schedule::Algorithm::RecursiveDoubling, schedule::Collective::AllGather, p, k), ag);
      if (!f) {
        EXPECT_EQ(criticalPath(schedule::Algorithm::RecursiveDoubling, schedule::Collective::AllGather, p, k), (p - 1) * k);
      }
      size_t rs = 0;
      for (int i = 1; i <= m; ++i) rs += (P >> i) * k;
      if (!f) {
        EXPECT_EQ(criticalPath(schedule::Algorithm::HalvingDoubling, schedule::Collective::ReduceScatter, p, k), rs);
      } else {
        EXPECT_LE(criticalPath(schedule::Algorithm::HalvingDoubling, schedule::Collective::ReduceScatter, p, k), p * k + 2 * rs + k);
      }
    }
}

TEST(DoubleTree, LinksAreConsistentAndEveryRankIsALeafOnce) {
  std::vector<int> sizes;
  for (int p = 1; p <= 300; ++p) sizes.push_back(p);
  for (int p : {511, 512, 513, 1000, 1023, 1024, 4095, 4096}) sizes.push_back(p);
  for (int p : sizes) {
    std::vector<int> leafIn(p, 0);
    for (int tree = 0; tree < 2; ++tree) {
      int roots = 0;
      for (int r = 0; r < p; ++r) {
        schedule::TreeLinks t = schedule::doubleTreeLinks(p, tree, r);
        if (t.parent < 0) ++roots;
        if (t.nchildren == 0) ++leafIn[r];
        for (int c = 0; c < t.nchildren; ++c) ASSERT_EQ(schedule::doubleTreeLinks(p, tree, t.children[c]).parent, r) << p;
        if (t.parent >= 0) {
          schedule::TreeLinks up = schedule::doubleTreeLinks(p, tree, t.parent);
          ASSERT_TRUE(std::count(up.children, up.children + up.nchildren, r) == 1) << p << " " << r;
        }
      }
      ASSERT_EQ(roots, 1) << p;
    }
    for (int r = 0; r < p; ++r) ASSERT_GE(leafIn[r], 1) << "p=" << p << " rank " << r << " is interior in both";
    // Parent links are consistent and acyclic, so the depth is the longest chain.
    ASSERT_LE(schedule::doubleTreeDepth(p, false), static_cast<int>(std::ceil(std::log2(p + 1))) + 1) << p;
  }
}

TEST(DoubleTree, RootedTreesHangBelowTheRoot) {
  for (int p : {1, 2, 3, 4, 7, 8, 9, 100, 1025})
    for (int root : {0, p / 2, p - 1}) {
      for (int tree = 0; tree < 2; ++tree) {
        schedule::TreeLinks top = schedule::rootedTreeLinks(p, root, tree, root);
        ASSERT_EQ(top.parent, -1);
        ASSERT_EQ(top.nchildren, p > 1 ? 1 : 0);
        int parentsAtRoot = 0;
        for (int r = 0; r < p; ++r)
          if (r != root && schedule::rootedTreeLinks(p, root, tree, r).parent == root) ++parentsAtRoot;
        ASSERT_EQ(parentsAtRoot, p > 1 ? 1 : 0);
      }
    }
}

// ---- the checker must reject plans that are wrong in each way it claims to detect ----

std::string checkMutated(Schedule sc, int p, size_t count, size_t chunk, std::function<void(int, schedule::Plan*)> mutate,
                         bool inPlace = false) {
  CheckOptions opts;
  opts.mutate = std::move(mutate);
  opts.inPlace = inPlace;
  return checkCollective(shape(sc, p, count, 0, chunk, 1), opts);
}

template <typename Pred, typename Fn>
void forSteps(schedule::Plan* p, Pred pred, Fn fn) {
  for (schedule::Lane& l : p->lanes)
    for (schedule::Step& s : l.steps)
      if (pred(s)) fn(s);
}

const Schedule kRingAllReduce{schedule::Algorithm::Ring, schedule::Collective::AllReduce};
const Schedule kTreeAllReduce{schedule::Algorithm::Tree, schedule::Collective::AllReduce};
const Schedule kTreeReduce{schedule::Algorithm::Tree, schedule::Collective::Reduce};
const Schedule kRdAllReduce{schedule::Algorithm::RecursiveDoubling, schedule::Collective::AllReduce};
const Schedule kHdAllReduce{schedule::Algorithm::HalvingDoubling, schedule::Collective::AllReduce};

TEST(PlanCheckerRejects, MissingStep) {
  EXPECT_NE(checkMutated(kRingAllReduce, 4, 20, 2,
                         [](int r, schedule::Plan* p) {
                           if (r == 2) p->lanes[0].steps.pop_back();
                         }),
            "");
}

TEST(PlanCheckerRejects, DoubleCounting) {
  // Rank 1 adds its input again to blocks that are already complete (final
  // flags dropped everywhere, so that the count, not the flag, is caught).
  auto err = checkMutated(kRingAllReduce, 4, 20, 2, [](int r, schedule::Plan* p) {
    forSteps(
        p, [](const schedule::Step&) { return true; }, [](schedule::Step& s) { s.final = false; });
    forSteps(
        p, [&](const schedule::Step& s) { return r == 1 && s.kind == schedule::StepKind::RecvCopySend; },
        [](schedule::Step& s) {
          s.kind = schedule::StepKind::RecvReduceSend;
          s.src = {schedule::Buffer::Input, s.dst.offset};
          s.srcIsContribution = true;
        });
  });
  EXPECT_NE(err.find("twice"), std::string::npos) << err;
}

TEST(PlanCheckerRejects, WrongPeer) {
  EXPECT_NE(checkMutated(kRingAllReduce, 4, 20, 2,
                         [](int r, schedule::Plan* p) {
                           if (r == 0) p->lanes[0].steps[0].sendPeer = 2;
                         }),
            "");
}

TEST(PlanCheckerRejects, MissingFinal) {
  for (Schedule sc : {kRingAllReduce, kTreeAllReduce, kRdAllReduce, kHdAllReduce}) {
    auto err = checkMutated(sc, 5, 20, 2, [](int, schedule::Plan* p) {
      forSteps(
          p, [](const schedule::Step&) { return true; }, [](schedule::Step& s) { s.final = false; });
    });
    EXPECT_NE(err.find("final"), std::string::npos) << err;
  }
}

TEST(PlanCheckerRejects, FinalTwiceOrOnPartialSums) {
  for (Schedule sc : {kRingAllReduce, kTreeAllReduce, kRdAllReduce, kHdAllReduce}) {
    auto err = checkMutated(sc, 6, 20, 2, [](int, schedule::Plan* p) {
      forSteps(
          p, [](const schedule::Step& s) { return stepWritesDst(s.kind); }, [](schedule::Step& s) { s.final = true; });
    });
    EXPECT_NE(err.find("final operation"), std::string::npos) << err;
  }
}

TEST(PlanCheckerRejects, ContributionFlagWrong) {
  auto missing = checkMutated(kTreeAllReduce, 7, 20, 2, [](int, schedule::Plan* p) {
    forSteps(
        p, [](const schedule::Step& s) { return s.srcIsContribution; }, [](schedule::Step& s) { s.srcIsContribution = false; });
  });
  EXPECT_NE(missing.find("without the contribution flag"), std::string::npos) << missing;
  auto extra = checkMutated(kHdAllReduce, 7, 20, 2, [](int, schedule::Plan* p) {
    forSteps(
        p, [](const schedule::Step& s) { return stepReadsSrc(s.kind) && s.src.buffer == schedule::Buffer::Output; },
        [](schedule::Step& s) { s.srcIsContribution = true; });
  });
  EXPECT_NE(extra.find("not the rank's raw input"), std::string::npos) << extra;
}

TEST(PlanCheckerRejects, FifoInvariant) {
  // Move the second half of a ring lane into a lane of its own on the same
  // channel: two lanes then share the FIFOs to and from the neighbours.
  auto err = checkMutated(kRingAllReduce, 4, 40, 2, [](int, schedule::Plan* p) {
    schedule::Lane second = p->lanes[0];
    const size_t half = second.steps.size() / 2;
    second.key.index = 7;
    second.steps.erase(second.steps.begin(), second.steps.begin() + half);
    p->lanes[0].steps.resize(half);
    p->lanes.push_back(second);
  });
  EXPECT_NE(err.find("FIFO invariant"), std::string::npos) << err;
}

TEST(PlanCheckerRejects, ScratchOutOfRange) {
  auto err = checkMutated(kTreeReduce, 7, 20, 2, [](int, schedule::Plan* p) { p->scratchElems = 0; });
  EXPECT_NE(err.find("outside the buffer"), std::string::npos) << err;
}

TEST(PlanCheckerRejects, OutputOfANonRootReduceRank) {
  // Only the root's recvbuff exists: a partial sum kept in a non-root output is an error.
  auto err = checkMutated(kTreeReduce, 7, 20, 2, [](int, schedule::Plan* p) {
    forSteps(
        p, [](const schedule::Step& s) { return s.dst.buffer == schedule::Buffer::Scratch || s.src.buffer == schedule::Buffer::Scratch; },
        [](schedule::Step& s) {
          if (s.dst.buffer == schedule::Buffer::Scratch) s.dst.buffer = schedule::Buffer::Output;
          if (s.src.buffer == schedule::Buffer::Scratch) s.src.buffer = schedule::Buffer::Output;
        });
  });
  EXPECT_NE(err.find("outside the buffer"), std::string::npos) << err;
}

TEST(PlanCheckerRejects, StepLargerThanAChunk) {
  auto err = checkMutated(kRdAllReduce, 4, 20, 2, [](int, schedule::Plan* p) {
    forSteps(
        p, [](const schedule::Step&) { return true; }, [](schedule::Step& s) { s.count *= 2; });
  });
  EXPECT_NE(err.find("more than one chunk"), std::string::npos) << err;
}

TEST(PlanCheckerRejects, SizeMismatch) {
  auto err = checkMutated(kHdAllReduce, 4, 20, 4, [](int r, schedule::Plan* p) {
    if (r != 1) return;
    forSteps(
        p, [](const schedule::Step& s) { return s.kind == schedule::StepKind::Send && s.count > 1; }, [](schedule::Step& s) { s.count -= 1; });
  });
  EXPECT_NE(err, "");
}

TEST(PlanCheckerRejects, ReadBeforeWrite) {
  // Recursive doubling on an extra rank: sending from the output, which has
  // not been written yet, instead of the input.
  auto err = checkMutated(kRdAllReduce, 5, 20, 2, [](int r, schedule::Plan* p) {
    if (r != 4) return;
    forSteps(
        p, [](const schedule::Step& s) { return s.kind == schedule::StepKind::Send; },
        [](schedule::Step& s) {
          s.src.buffer = schedule::Buffer::Output;
          s.srcIsContribution = false;
        });
  });
  EXPECT_NE(err.find("nothing has written"), std::string::npos) << err;
}

TEST(PlanCheckerRejects, InPlaceOverwriteBeforeRead) {
  // An early copy into the output, overwritten later: harmless out of place,
  // but in place (recvbuff == sendbuff + rank*count) it clobbers input the
  // ring still has to read.
  auto mutate = [](int r, schedule::Plan* p) {
    if (r != 1) return;
    auto& steps = p->lanes[0].steps;
    steps.insert(steps.begin(), schedule::copyStep({schedule::Buffer::Input, 0}, {schedule::Buffer::Output, 0}, 1, true, false));
  };
  const Schedule rs{schedule::Algorithm::Ring, schedule::Collective::ReduceScatter};
  EXPECT_EQ(checkMutated(rs, 4, 6, 2, mutate, false), "");
  EXPECT_NE(checkMutated(rs, 4, 6, 2, mutate, true), "");
}

TEST(PlanCheckerRejects, LeftOverMessage) {
  auto err = checkMutated(kTreeAllReduce, 4, 1, 1, [](int r, schedule::Plan* p) {
    if (r == 2) p->lanes[0].steps.push_back(schedule::sendStep(0, {schedule::Buffer::Input, 0}, 1, true));
  });
  EXPECT_NE(err, "");
}

// The FIFOs of all ranks are matched end to end once every plan is compiled:
// a receive that nobody sends waits forever, a send nobody receives is left
// over, and a lane on the wrong channel meets the other channel's messages.
const Schedule kAllToAll{schedule::Algorithm::Direct, schedule::Collective::AllToAll};

TEST(PlanCheckerRejects, AllToAllReceiveThatNobodySends) {
  auto err = checkMutated(kAllToAll, 6, 3, 2, [](int r, schedule::Plan* p) {
    if (r != 3) return;
    auto& lanes = p->lanes;
    lanes.erase(std::remove_if(lanes.begin(), lanes.end(),
                               [](const schedule::Lane& l) { return l.key.kind == schedule::LaneKind::PeerSend && l.key.index == 1; }),
                lanes.end());
  });
  EXPECT_NE(err.find("deadlock"), std::string::npos) << err;
  EXPECT_NE(err.find("rank 1 lane recv-from 3 step 0 at recv waiting for rank 3"), std::string::npos) << err;
}

TEST(PlanCheckerRejects, AllToAllSendThatNobodyReceives) {
  auto err = checkMutated(kAllToAll, 6, 3, 2, [](int r, schedule::Plan* p) {
    if (r != 3) return;
    for (schedule::Lane& l : p->lanes)
      if (l.key.kind == schedule::LaneKind::PeerRecv && l.key.index == 1) l.steps.clear();
  });
  EXPECT_NE(err.find("rank 1 sent rank 3 on channel 63 a message that was never received"), std::string::npos)
      << err;
}

TEST(PlanCheckerRejects, AllToAllBlocksSwapped) {
  auto err = checkMutated(kAllToAll, 5, 1, 1, [](int r, schedule::Plan* p) {
    if (r != 2) return;
    std::vector<schedule::Step*> recvs;
    for (schedule::Lane& l : p->lanes)
      if (l.key.kind == schedule::LaneKind::PeerRecv) recvs.push_back(&l.steps[0]);
    std::swap(recvs[0]->dst, recvs[1]->dst);
  });
  EXPECT_NE(err.find("holds element"), std::string::npos) << err;
}

TEST(PlanCheckerRejects, LaneOnTheWrongChannel) {
  // Rank 2 runs its two ring channels' lanes on each other's FIFOs.
  const schedule::CollShape s = shape({schedule::Algorithm::Ring, schedule::Collective::AllGather}, 5, 3, 0, 1, 2);
  ASSERT_EQ(checkCollective(s), "");
  CheckOptions opts;
  opts.mutate = [](int r, schedule::Plan* p) {
    if (r == 2 && p->lanes.size() == 2) std::swap(p->lanes[0].channel, p->lanes[1].channel);
  };
  EXPECT_NE(checkCollective(s, opts), "");
}

// The peer-access checker notices what would be wrong with such a plan: a
// rank that writes only its own output, blocks that overlap (two lanes
// writing one element: a race whatever order they run in), a missing final
// operation, a source read at one rank only.
TEST(PlanChecker, PeerAccessCheckerCatchesBrokenPlans) {
  const Schedule allReduce{schedule::Algorithm::PeerAccess, schedule::Collective::AllReduce};
  const schedule::CollShape s = shape(allReduce, 4, 40, 0, 1, 2);
  ASSERT_EQ(checkCollective(s), "");
  auto broken = [&](std::function<void(schedule::Step*)> edit, bool inPlace = false) {
    CheckOptions o;
    o.inPlace = inPlace;
    o.mutate = [&](int rank, schedule::Plan* plan) {
      if (rank == 1) edit(&plan->lanes.front().steps.front());
    };
    return checkCollective(s, o);
  };
  EXPECT_NE(broken([](schedule::Step* st) { st->peerDst = false; }).find("was never written"), std::string::npos);
  EXPECT_NE(broken([](schedule::Step* st) { st->dst.offset -= 1; }).find("races another lane"), std::string::npos);
  EXPECT_NE(broken([](schedule::Step* st) { st->src.offset -= 1; }, true).find("races another lane"),
            std::string::npos);
  EXPECT_NE(broken([](schedule::Step* st) { st->final = false; }).find("without the final operation"),
            std::string::npos);
  EXPECT_NE(broken([](schedule::Step* st) { st->peerSrc = false; }).find("incomplete sum"), std::string::npos);
  EXPECT_NE(broken([](schedule::Step* st) { st->count += 40; }).find("past rank"), std::string::npos);
}

}  // namespace
}  // namespace braid
