// Every collective between P ranks that are threads of this process, through
// the in-process transport, checked against results computed locally
// (tests/common/coll_cases.h). Then the collectives each schedule applies to
// with NCCL_ALGO forcing Ring, Tree, RecursiveDoubling and HalvingDoubling.
//
// Sizes: counts 1 and 7 (smaller than P for large P, odd), 3P+1 (a few
// elements per rank, not divisible by P), and ~100k elements for P <= 8;
// beyond, 64P+3 (67 where buffers hold P*count elements).
// 64 threads on 2 cores oversubscribe heavily, so large P keeps counts small.
#include <gtest/gtest.h>
#include <nccl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "common/coll_cases.h"
#include "threads/thread_ranks.h"

namespace collcase {
// Test names and failure headers show the collective by name.
void PrintTo(Coll c, std::ostream* os) { *os << collName(c); }
}  // namespace collcase

namespace {

using collcase::Call;
using collcase::Coll;

constexpr size_t kLargeCount = 100003;
constexpr int kLargeCountMaxRanks = 8;

const ncclDataType_t kTypes[] = {ncclFloat32, ncclInt32, ncclBfloat16};
const ncclRedOp_t kOps[] = {ncclSum, ncclMax, ncclAvg};

// Collectives whose buffers hold nranks * count elements.
bool scalesWithRanks(Coll c) {
  return c == Coll::kReduceScatter || c == Coll::kAllGather || c == Coll::kAlltoAll ||
         c == Coll::kGather || c == Coll::kScatter;
}

std::vector<size_t> countsFor(Coll coll, int nranks) {
  std::vector<size_t> counts = {1, 7, static_cast<size_t>(3 * nranks + 1)};
  // Beyond 8 ranks: a mid-size count spanning several 8 KiB FIFO slots, kept
  // small where every rank's buffers hold nranks * count elements.
  if (nranks <= kLargeCountMaxRanks) counts.push_back(kLargeCount);
  else counts.push_back(scalesWithRanks(coll) ? 67 : static_cast<size_t>(64 * nranks + 3));
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

std::vector<int> rootsFor(int nranks) {
  if (nranks == 1) return {0};
  return {0, nranks - 1};
}

// The calls one collective gets at nranks, in the order every rank issues them.
std::vector<Call> callsFor(Coll coll, int nranks) {
  std::vector<Call> calls;
  const std::vector<int> roots = collcase::hasRoot(coll) ? rootsFor(nranks) : std::vector<int>{0};
  for (size_t count : countsFor(coll, nranks)) {
    for (ncclDataType_t type : kTypes) {
      const std::vector<ncclRedOp_t> ops =
          collcase::isReduction(coll) ? std::vector<ncclRedOp_t>(std::begin(kOps), std::end(kOps))
                                      : std::vector<ncclRedOp_t>{ncclSum};
      for (ncclRedOp_t op : ops)
        for (int root : roots) calls.push_back(Call{coll, type, op, count, root, false});
    }
    // In place: one type is enough, the layout is what differs.
    if (collcase::supportsInPlace(coll) && count != kLargeCount)
      for (int root : roots) calls.push_back(Call{coll, ncclFloat32, ncclSum, count, root, true});
  }
  return calls;
}

// Settings every rank thread reads at ncclCommInitRank. Smaller FIFOs at large
// P keep memory in check (alltoall at 64 ranks opens 64*63 connections) and,
// at small P, split the large count over many slots.
threadtest::ThreadOptions optionsFor(int nranks, const char* algo = nullptr) {
  threadtest::ThreadOptions o;
  o.timeoutSeconds = 150;
  o.env.push_back({"NCCL_BUFFSIZE", nranks > kLargeCountMaxRanks ? "65536" : "262144"});
  if (algo) o.env.push_back({"NCCL_ALGO", algo});
  return o;
}

void runCalls(ncclComm_t comm, int rank, int nranks, const std::vector<Call>& calls) {
  collcase::Runner runner(comm, rank, nranks,
                          {[](const std::string& m) { threadtest::fail(m); },
                           [](const std::string& s) { threadtest::progress(s); }});
  for (const Call& c : calls)
    if (!runner.run(c)) threadtest::stopRank();
}

std::string nameOf(Coll c) { return collcase::collName(c); }

// ---- every collective at every P ------------------------------------------------------

const Coll kAllColls[] = {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather,
                          Coll::kBroadcast, Coll::kReduce,        Coll::kAlltoAll,
                          Coll::kGather,    Coll::kScatter,       Coll::kSendRecvRing};
const int kRankCounts[] = {1, 2, 3, 5, 8, 16, 33, 64};

class ThreadCollectives : public ::testing::TestWithParam<std::tuple<Coll, int>> {};

TEST_P(ThreadCollectives, MatchesLocalReference) {
  const Coll coll = std::get<0>(GetParam());
  const int nranks = std::get<1>(GetParam());
  const std::vector<Call> calls = callsFor(coll, nranks);
  threadtest::runThreadRanks(
      nranks, [&calls](ncclComm_t comm, int rank, int n) { runCalls(comm, rank, n, calls); },
      optionsFor(nranks));
}

INSTANTIATE_TEST_SUITE_P(All, ThreadCollectives,
                         ::testing::Combine(::testing::ValuesIn(kAllColls),
                                            ::testing::ValuesIn(kRankCounts)),
                         [](const ::testing::TestParamInfo<std::tuple<Coll, int>>& info) {
                           return nameOf(std::get<0>(info.param)) + "_P" +
                                  std::to_string(std::get<1>(info.param));
                         });

// ---- NCCL_ALGO forced -------------------------------------------------------------------

const int kAlgoRankCounts[] = {2, 3, 4, 5, 8, 13, 33};

class ThreadForcedAlgo : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ThreadForcedAlgo, ApplicableCollectivesMatchLocalReference) {
  const collcase::Algo& algo = collcase::forcedAlgos()[std::get<0>(GetParam())];
  const int nranks = std::get<1>(GetParam());
  std::vector<Call> calls;
  for (Coll c : algo.colls) {
    const auto more = callsFor(c, nranks);
    calls.insert(calls.end(), more.begin(), more.end());
  }
  const char* outer = std::getenv("NCCL_ALGO");
  const std::string before = outer ? outer : "<unset>";
  threadtest::runThreadRanks(
      nranks, [&calls](ncclComm_t comm, int rank, int n) { runCalls(comm, rank, n, calls); },
      optionsFor(nranks, algo.name));
  const char* after = std::getenv("NCCL_ALGO");
  EXPECT_EQ(after ? after : "<unset>", before) << "NCCL_ALGO leaked out of the run";
}

INSTANTIATE_TEST_SUITE_P(Algos, ThreadForcedAlgo,
                         ::testing::Combine(::testing::Range(0, 4), ::testing::ValuesIn(kAlgoRankCounts)),
                         [](const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
                           return std::string(collcase::forcedAlgos()[std::get<0>(info.param)].name) +
                                  "_P" + std::to_string(std::get<1>(info.param));
                         });

// NCCL's other NCCL_ALGO forms: short names, lists, exclusion, per collective.
class ThreadAlgoSyntax : public ::testing::TestWithParam<const char*> {};

TEST_P(ThreadAlgoSyntax, ResultsStayCorrect) {
  constexpr int kRanks = 6;
  std::vector<Call> calls;
  for (Coll c : {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast,
                 Coll::kReduce}) {
    for (size_t count : {size_t{7}, size_t{3 * kRanks + 1}, size_t{5003}}) {
      calls.push_back(Call{c, ncclFloat32, ncclSum, count, kRanks - 1, false});
      calls.push_back(Call{c, ncclInt32, ncclAvg, count, 0, false});
    }
  }
  threadtest::runThreadRanks(
      kRanks, [&calls](ncclComm_t comm, int rank, int n) { runCalls(comm, rank, n, calls); },
      optionsFor(kRanks, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Forms, ThreadAlgoSyntax,
                         ::testing::Values("RD", "HD", "tree,ring", "^Ring", "^tree,rd",
                                           "allreduce:tree;broadcast:ring",
                                           "allreduce:hd;reducescatter:HalvingDoubling;allgather:rd",
                                           "reduce:tree;broadcast:tree"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name;
                           for (const char* p = info.param; *p; ++p)
                             name += std::isalnum(static_cast<unsigned char>(*p)) ? *p : '_';
                           return name + "_" + std::to_string(info.index);
                         });

// ---- repeated shapes --------------------------------------------------------------------

// A lone call runs from its communicator's plan cache (src/engine/lanes/plan_cache.h) from
// the second call of a shape on. A few shapes called again and again (cache hits)
// with fresh buffers, other ops and in-place calls prove that a reused plan runs on
// the current call's buffers and reduction; a sweep over more shapes than the
// cache holds evicts them, and they must come back correct.
TEST(ThreadPlanReuse, RepeatedShapesStayCorrect) {
  constexpr int kRanks = 4;
  constexpr int kHotShapes = 6;
  constexpr int kAllShapes = 72;  // more than PlanCache::kEntries (64)
  const ncclRedOp_t ops[] = {ncclSum, ncclMax, ncclAvg};
  std::vector<Call> calls;
  // Each round gives a shape another op and flips in-place; the root (part of
  // the shape) stays.
  auto add = [&](int round, int shape) {
    const size_t count = 1 + static_cast<size_t>(shape) * 97;
    const Coll coll = shape % 3 == 2 ? Coll::kBroadcast : Coll::kAllReduce;
    calls.push_back(Call{coll, ncclFloat32, ops[round % 3], count, shape % kRanks, round % 2 == 1});
  };
  for (int round = 0; round < 4; ++round)
    for (int shape = 0; shape < kHotShapes; ++shape) add(round, shape);
  for (int shape = 0; shape < kAllShapes; ++shape) add(0, shape);
  for (int round = 1; round < 5; ++round)
    for (int shape = 0; shape < kHotShapes; ++shape) add(round, shape);
  threadtest::runThreadRanks(
      kRanks, [&calls](ncclComm_t comm, int rank, int n) { runCalls(comm, rank, n, calls); },
      optionsFor(kRanks));
}

}  // namespace
