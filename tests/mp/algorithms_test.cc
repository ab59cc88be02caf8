// Each schedule forced with NCCL_ALGO (Ring, Tree, RecursiveDoubling,
// HalvingDoubling) on 2..8 forked ranks over shared memory and 2..5 over TCP,
// running the collectives that schedule applies to (float32 and int32; sum,
// avg, max; counts 1, 13, 4099, 200000; roots 0 and P-1). Results are checked
// against values computed locally (tests/common/coll_cases.h): integer-valued
// data, so sums and maxima are exact in any order of addition.
//
// NCCL_ALGO is read at ncclCommInitRank, so each case forks its ranks with the
// variable in their environment. A library that ignores NCCL_ALGO runs its
// default schedule and must still pass.
#include <gtest/gtest.h>
#include <nccl.h>

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <ostream>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/coll_cases.h"
#include "common/log_dir.h"
#include "common/mp_harness.h"
#include "common/mp_nccl.h"

namespace {

using collcase::Call;
using collcase::Coll;

const size_t kCounts[] = {1, 13, 4099, 200000};
const ncclDataType_t kTypes[] = {ncclFloat32, ncclInt32};
const ncclRedOp_t kOps[] = {ncclSum, ncclAvg, ncclMax};
constexpr size_t kInPlaceCount = 4099;

std::vector<Call> callsFor(const collcase::Algo& algo, int nranks) {
  std::vector<Call> calls;
  for (Coll coll : algo.colls) {
    std::vector<int> roots = {0};
    if (collcase::hasRoot(coll) && nranks > 1) roots.push_back(nranks - 1);
    std::vector<ncclRedOp_t> ops = {ncclSum};
    if (collcase::isReduction(coll)) ops.assign(std::begin(kOps), std::end(kOps));
    for (size_t count : kCounts) {
      for (ncclDataType_t type : kTypes)
        for (ncclRedOp_t op : ops)
          for (int root : roots) calls.push_back(Call{coll, type, op, count, root, false});
      if (count == kInPlaceCount && collcase::supportsInPlace(coll))
        for (int root : roots) calls.push_back(Call{coll, ncclInt32, ncclSum, count, root, true});
    }
  }
  return calls;
}

void rankBody(const collcase::Algo& algo, int rank, int nranks, const ncclUniqueId& id) {
  mptest::checkRunsBraid();
  ncclComm_t comm;
  mptest::progress("ncclCommInitRank");
  MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
  collcase::Runner runner(
      comm, rank, nranks,
      {[](const std::string& m) { mptest::expectFailed(__FILE__, __LINE__, "%s", m.c_str()); },
       [](const std::string& s) { mptest::progress("%s", s.c_str()); }});
  for (const Call& c : callsFor(algo, nranks))
    MP_CHECK(runner.run(c), "the NCCL call failed; the ranks are out of step, stopping");
  mptest::progress("ncclCommDestroy");
  MP_NCCL_CHECK(ncclCommDestroy(comm));
}

struct Case {
  int algo;  // index into collcase::forcedAlgos()
  int nranks;
  const char* transport;
  const char* buffsize;  // NCCL_BUFFSIZE, or null for the default (4 MiB)
};

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (int a = 0; a < static_cast<int>(collcase::forcedAlgos().size()); ++a) {
    for (int n = 2; n <= 8; ++n)
      // At 7 ranks, 8 KiB slots split every chunk of the large counts over many steps.
      cases.push_back({a, n, "shm", n == 7 ? "65536" : nullptr});
    // Over TCP, 32 KiB slots.
    for (int n : {2, 3, 4, 5}) cases.push_back({a, n, "tcp", "262144"});
  }
  return cases;
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << collcase::forcedAlgos()[c.algo].name << ", " << c.nranks << " ranks, " << c.transport
      << ", NCCL_BUFFSIZE " << (c.buffsize ? c.buffsize : "default");
}

class MpForcedAlgo : public ::testing::TestWithParam<Case> {};

TEST_P(MpForcedAlgo, ApplicableCollectivesMatchLocalReference) {
  const Case& c = GetParam();
  const collcase::Algo& algo = collcase::forcedAlgos()[c.algo];
  mptest::RankOptions opts = mptest::transportOptions(c.transport, 120);
  opts.env.push_back({"NCCL_ALGO", algo.name});
  if (c.buffsize) opts.env.push_back({"NCCL_BUFFSIZE", c.buffsize});
  mptest::runRanks(
      c.nranks, [&algo](int rank, int nranks, const ncclUniqueId& id) { rankBody(algo, rank, nranks, id); },
      opts);
}

INSTANTIATE_TEST_SUITE_P(Algos, MpForcedAlgo, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           const Case& c = info.param;
                           return std::string(collcase::forcedAlgos()[c.algo].name) + "_P" +
                                  std::to_string(c.nranks) + "_" + c.transport;
                         });

// ---- the algorithm the library says it ran ---------------------------------------

// With NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=TUNING the planner logs one line
// per choice, "<Collective> <n> B x <P> ranks (<transport>): <Algo>/<Proto> ...".
// A forced algorithm must be the one chosen for every collective it applies to.
// When the library logs no such line (NCCL_ALGO not wired in yet, or the line
// changed), the test is skipped rather than failed: the results are checked above.
class MpForcedAlgoLogged : public ::testing::TestWithParam<int> {};

// Ranks over shm with `algo` forced, logging `subsys` at INFO into files in `dir`.
mptest::RankOptions loggingOptions(const collcase::Algo& algo, const char* subsys, const char* dir,
                                   int timeoutSeconds) {
  mptest::RankOptions opts = mptest::transportOptions("shm", timeoutSeconds);
  opts.env.push_back({"NCCL_ALGO", algo.name});
  opts.env.push_back({"NCCL_DEBUG", "INFO"});
  opts.env.push_back({"NCCL_DEBUG_SUBSYS", subsys});
  opts.env.push_back({"NCCL_DEBUG_FILE", std::string(dir) + "/rank.%p.log"});
  return opts;
}

TEST_P(MpForcedAlgoLogged, ChosenAlgorithmIsTheForcedOne) {
  constexpr int kRanks = 4;
  const collcase::Algo& algo = collcase::forcedAlgos()[GetParam()];
  char dir[] = "/tmp/braid_algo_log_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  mptest::RankOptions opts = loggingOptions(algo, "TUNING", dir, 60);
  mptest::runRanks(
      kRanks,
      [&algo](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        collcase::Runner runner(
            comm, rank, nranks,
            {[](const std::string& m) { mptest::expectFailed(__FILE__, __LINE__, "%s", m.c_str()); }, {}});
        for (Coll coll : algo.colls)
          for (size_t count : {size_t{1}, size_t{4099}, size_t{200000}})
            MP_CHECK(runner.run(Call{coll, ncclFloat32, ncclSum, count, 0, false}), "stopping");
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      opts);

  const std::regex choice(
      "(AllReduce|ReduceScatter|AllGather|Broadcast|Reduce) [0-9.e+]+ B x [0-9]+ ranks \\([^)]*\\): ([A-Za-z]+)/");
  std::set<std::string> seen;
  int choices = 0;
  for (const auto& line : mptest::readLogLines(dir)) {
    std::smatch m;
    if (!std::regex_search(line, m, choice)) continue;
    choices++;
    seen.insert(m[1]);
    EXPECT_EQ(m[2].str(), algo.name) << "NCCL_ALGO=" << algo.name << " but the library chose: " << line;
  }
  if (choices == 0) GTEST_SKIP() << "the library logged no algorithm choice under NCCL_DEBUG_SUBSYS=TUNING";
  for (Coll coll : algo.colls)
    EXPECT_TRUE(seen.count(collcase::collName(coll)))
        << "no algorithm choice logged for " << collcase::collName(coll);
}

INSTANTIATE_TEST_SUITE_P(Algos, MpForcedAlgoLogged, ::testing::Range(0, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(collcase::forcedAlgos()[info.param].name);
                         });

// ---- ranks numbered across hosts ---------------------------------------------------

// Five ranks on two "hosts" (BRAID_HOSTID), numbered alternately: rings and
// trees run over host-contiguous positions (0 2 4 | 1 3), shared memory within
// a host and TCP across. Every schedule must still give exact results, and
// rank 0 must say it reordered.
class MpHostInterleaved : public ::testing::TestWithParam<int> {};

void runInterleaved(const collcase::Algo& algo) {
  char dir[] = "/tmp/braid_order_log_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  mptest::RankOptions opts = loggingOptions(algo, "INIT", dir, 120);
  opts.env.push_back({"NCCL_BUFFSIZE", "262144"});
  mptest::runRanks(
      5,
      [&algo](int rank, int nranks, const ncclUniqueId& id) {
        setenv("BRAID_HOSTID", rank % 2 ? "host-b" : "host-a", 1);
        rankBody(algo, rank, nranks, id);
      },
      opts);
  bool said = false, bridged = false;
  for (const auto& line : mptest::readLogLines(dir)) {
    said = said || line.find("ring order follows hosts (2 links cross hosts instead of 4): 0 2 4 1 3") !=
                       std::string::npos;
    bridged = bridged || line.find("(bridged over tcp") != std::string::npos;
  }
  EXPECT_TRUE(said) << "rank 0 did not log the host-contiguous ring order";
  EXPECT_TRUE(bridged) << "no lane FIFO was bridged between the hosts";
}

// FIFOs between the hosts are bridged over TCP.
TEST_P(MpHostInterleaved, SchedulesFollowHostsAndMatchLocalReference) {
  runInterleaved(collcase::forcedAlgos()[GetParam()]);
}

INSTANTIATE_TEST_SUITE_P(Algos, MpHostInterleaved, ::testing::Range(0, 4),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(collcase::forcedAlgos()[info.param].name);
                         });

}  // namespace
