// braid_plan: prints the plan braid generates for one rank of a collective and
// optionally proves the plans of all ranks with the symbolic checker.
//
//   braid_plan allreduce tree 8 3 1000 --chunk 128 --channels 2
//   braid_plan allgather recursivedoubling 6 all 4 --check
//   braid_plan reducescatter halvingdoubling 1000 0 1 --check --quiet
#include <strings.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "plan_checker.h"

namespace braid {
namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: braid_plan COLLECTIVE ALGORITHM NRANKS RANK|all COUNT [options]\n"
               "  COLLECTIVE  allreduce reducescatter allgather broadcast reduce alltoall gather scatter\n"
               "  ALGORITHM   ring tree recursivedoubling halvingdoubling direct (unsupported: ring is used)\n"
               "  COUNT       elements, in NCCL's per-call meaning (per-rank block for allgather etc.)\n"
               "options:\n"
               "  --chunk N      largest step in elements (one FIFO slot; default COUNT)\n"
               "  --channels N   channels (default 1)\n"
               "  --root N       root of broadcast/reduce/gather/scatter (default 0)\n"
               "  --check        run every rank's plan symbolically and report (exit 1 if wrong)\n"
               "  --in-place     check with input and output aliased as NCCL's in-place\n"
               "  --slots N      FIFO slots for --check (default 2)\n"
               "  --lifo         for --check, run woken lanes depth first (last in, first out)\n"
               "  --quiet        do not print plans\n"
               "  --help         print this\n");
}

template <typename E, typename NameFn>
bool parseEnum(const char* text, int n, NameFn name, E* out) {
  for (int i = 0; i < n; ++i)
    if (strcasecmp(text, name(static_cast<E>(i))) == 0) {
      *out = static_cast<E>(i);
      return true;
    }
  return false;
}

bool parseInt(const char* text, long long* out) {
  char* end = nullptr;
  *out = std::strtoll(text, &end, 10);
  return end && *end == '\0' && end != text;
}

struct Args {
  schedule::CollShape shape;
  CheckOptions opts;
  int rank = -1;  // -1: all ranks
  bool check = false, quiet = false, help = false;
};

// Empty: parsed. Otherwise what is wrong with the command line.
std::string parseArgs(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      a->help = true;
      return "";
    }
  if (argc < 6) return "expected COLLECTIVE ALGORITHM NRANKS RANK|all COUNT";
  schedule::CollShape& s = a->shape;
  if (!parseEnum<schedule::Collective>(argv[1], 10, schedule::collectiveName, &s.coll))
    return std::string("unknown collective '") + argv[1] + "'";
  if (!parseEnum<schedule::Algorithm>(argv[2], schedule::kNumAlgorithms, schedule::algorithmName, &s.algorithm))
    return std::string("unknown algorithm '") + argv[2] + "'";
  long long nranks = 0, rank = -1, count = 0;
  if (!parseInt(argv[3], &nranks) || nranks < 1 || nranks > INT32_MAX)
    return std::string("NRANKS must be a positive number, not '") + argv[3] + "'";
  if (std::strcmp(argv[4], "all") != 0 && (!parseInt(argv[4], &rank) || rank < 0 || rank >= nranks))
    return std::string("RANK must be 'all' or 0..NRANKS-1, not '") + argv[4] + "'";
  if (!parseInt(argv[5], &count) || count < 0)
    return std::string("COUNT must be a number >= 0, not '") + argv[5] + "'";
  s.nranks = static_cast<int>(nranks);
  a->rank = static_cast<int>(rank);
  s.count = static_cast<size_t>(count);
  s.chunkElems = std::max<size_t>(1, s.count);
  for (int i = 6; i < argc; ++i) {
    long long v = 0;
    const bool hasValue = i + 1 < argc && parseInt(argv[i + 1], &v);
    if (!std::strcmp(argv[i], "--check"))
      a->check = true;
    else if (!std::strcmp(argv[i], "--quiet"))
      a->quiet = true;
    else if (!std::strcmp(argv[i], "--in-place"))
      a->opts.inPlace = true;
    else if (!std::strcmp(argv[i], "--lifo"))
      a->opts.lifo = true;
    else if (!std::strcmp(argv[i], "--chunk") && hasValue && v > 0)
      s.chunkElems = static_cast<size_t>(v), ++i;
    else if (!std::strcmp(argv[i], "--channels") && hasValue && v > 0 && v <= INT32_MAX)
      s.nchannels = static_cast<int>(v), ++i;
    else if (!std::strcmp(argv[i], "--root") && hasValue && v >= 0 && v < nranks)
      s.root = static_cast<int>(v), ++i;
    else if (!std::strcmp(argv[i], "--slots") && hasValue && v > 0 && v <= INT32_MAX)
      a->opts.nslots = static_cast<int>(v), ++i;
    else
      return std::string("bad option or value at '") + argv[i] + "'";
  }
  return "";
}

int run(int argc, char** argv) {
  Args a;
  const std::string bad = parseArgs(argc, argv, &a);
  if (a.help) {
    usage(stdout);
    return 0;
  }
  if (!bad.empty()) {
    std::fprintf(stderr, "braid_plan: %s\n", bad.c_str());
    usage(stderr);
    return 2;
  }
  const schedule::CollShape& s = a.shape;
  if (!algorithmSupports(s.algorithm, s.coll))
    std::printf("# %s has no %s schedule: the ring (or direct) plan is generated\n", algorithmName(s.algorithm),
                collectiveName(s.coll));
  if (!a.quiet)
    for (int r = a.rank < 0 ? 0 : a.rank; r <= (a.rank < 0 ? s.nranks - 1 : a.rank); ++r) {
      schedule::CollShape one = s;
      one.rank = r;
      schedule::Plan plan = generatePlan(one);
      std::printf("== rank %d (%s), scratch %zu elements\n%s", r, describeShape(one).c_str(), plan.scratchElems,
                  describePlan(plan).c_str());
    }
  if (!a.check) return 0;
  CheckStats stats;
  const std::string err = checkCollective(s, a.opts, &stats);
  if (!err.empty()) {
    std::printf("check FAILED: %s\n", err.c_str());
    return 1;
  }
  std::printf(
      "check ok: %s%s\n"
      "  critical path %zu steps; steps %zu in all, %zu on the busiest rank; lanes per rank <= %zu\n"
      "  elements sent %zu in all, %zu by the busiest rank; reduced by the busiest rank %zu; "
      "scratch <= %zu elements\n",
      describeShape(s).c_str(), a.opts.inPlace ? " in-place" : "", stats.criticalPathSteps, stats.steps,
      stats.maxStepsPerRank, stats.maxLanesPerRank, stats.elementsMoved, stats.maxSentPerRank,
      stats.maxReducedPerRank, stats.maxScratchElems);
  return 0;
}

}  // namespace
}  // namespace braid

int main(int argc, char** argv) { return braid::run(argc, argv); }
