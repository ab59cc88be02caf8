// The driver shared by every perf tool: join the job, sweep sizes, time,
// check, print an nccl-tests style table. Only rank 0 prints the table.
#include <nccl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/collective.h"
#include "common/data_check.h"
#include "common/launch_env.h"
#include "common/options.h"
#include "common/platform.h"
#include "common/table_format.h"

namespace braid::bench {
namespace {

// Bytes behind each buffer's used part that must stay untouched.
constexpr size_t kGuardBytes = 256;

struct FreeDeleter {
  void operator()(unsigned char* p) const { std::free(p); }
};
using HostBuffer = std::unique_ptr<unsigned char[], FreeDeleter>;

HostBuffer allocHost(size_t bytes) {
  constexpr size_t kAlign = 4096;
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign + kAlign;
  auto* p = static_cast<unsigned char*>(std::aligned_alloc(kAlign, rounded));
  if (p) std::memset(p, 0, rounded);  // fault the pages in before timing
  return HostBuffer(p);
}

const char* toolName(const char* argv0) {
  const char* slash = std::strrchr(argv0, '/');
  return slash ? slash + 1 : argv0;
}


bool progressWanted() {
  const char* v = std::getenv("BRAID_PROGRESS");
  if (v && *v) return std::strcmp(v, "0") != 0;
  return isatty(STDERR_FILENO) == 1;
}

// One rank's identity, exchanged once for the header.
struct RankRecord {
  int32_t rank;
  int32_t pid;
  char host[56];
};
static_assert(sizeof(RankRecord) == 64, "fixed-size record for the allgather");

struct Measurement {
  double usec = 0;
  double algbw = 0;
  double busbw = 0;
  int64_t wrong = -1;  // -1: not checked
};

class PerfRun {
 public:
  // commIdNote: how NCCL_COMM_ID came to be set, for the header (may be empty).
  PerfRun(const CollectiveSpec& spec, const Options& opts, const LaunchEnv& env, const char* tool,
          std::string commIdNote)
      : spec_(spec), opts_(opts), env_(env), tool_(tool), progress_(env.rank == 0 && progressWanted()),
        commIdNote_(std::move(commIdNote)) {}

  ~PerfRun() {
    if (comm_) ncclCommDestroy(comm_);
  }

  int run() {
    join();
    allocate();
    printHeader();
    for (int cycle = 0; opts_.runCycles == 0 || cycle < opts_.runCycles; ++cycle) sweepAll();
    return finish();
  }

 private:
  // Prints what failed on this rank and leaves; the launcher stops the others.
  [[noreturn]] void fail(const std::string& what) {
    std::fprintf(stderr, "%s: rank %d of %d: %s\n", tool_, env_.rank, env_.size, what.c_str());
    std::fflush(stdout);
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
    std::exit(1);
  }

  void check(ncclResult_t r, const char* call) {
    if (r == ncclSuccess) return;
    const char* detail = ncclGetLastError(comm_);
    fail(std::string(call) + " failed: " + ncclGetErrorString(r) +
         (detail && *detail ? std::string(": ") + detail : std::string()));
  }

  void join() {
    ncclUniqueId id;
    check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    check(ncclCommInitRank(&comm_, env_.size, id, env_.rank), "ncclCommInitRank");
  }

  // Sizes in elements at the largest size, over every type in the sweep.
  void allocate() {
    size_t sendBytes = 0, recvBytes = 0;
    for (const TypeInfo& t : opts_.types) {
      const CollCounts c = spec_.counts(opts_.maxBytes / t.size, env_.size);
      const size_t rank = static_cast<size_t>(env_.rank);
      sendBytes = std::max(sendBytes, c.sendCount * t.size);
      recvBytes = std::max({recvBytes, c.recvCount * t.size,
                            (c.sendInPlaceOffset * rank + c.sendCount) * t.size,
                            (c.recvInPlaceOffset * rank + c.recvCount) * t.size});
    }
    sendBytes_ = sendBytes;
    recvBytes_ = recvBytes;
    send_ = allocHost(sendBytes + kGuardBytes);
    recv_ = allocHost(recvBytes + kGuardBytes);
    if (!send_ || !recv_)
      fail("cannot allocate " + std::to_string(sendBytes + recvBytes) +
           " bytes of host buffers: lower -e");
  }

  void barrier() {
    check(ncclAllReduce(&barrierWord_, &barrierWord_, 1, ncclInt32, ncclSum, comm_, nullptr),
          "ncclAllReduce (barrier)");
  }

  double combineTime(double seconds) {
    double v = seconds;
    switch (opts_.average) {
      case 0: check(ncclBroadcast(&v, &v, 1, ncclFloat64, 0, comm_, nullptr), "ncclBroadcast (time)"); break;
      case 1:
        check(ncclAllReduce(&v, &v, 1, ncclFloat64, ncclSum, comm_, nullptr), "ncclAllReduce (time)");
        v /= env_.size;
        break;
      case 2: check(ncclAllReduce(&v, &v, 1, ncclFloat64, ncclMin, comm_, nullptr), "ncclAllReduce (time)"); break;
      default: check(ncclAllReduce(&v, &v, 1, ncclFloat64, ncclMax, comm_, nullptr), "ncclAllReduce (time)"); break;
    }
    return v;
  }

  int64_t sumAcrossRanks(int64_t local) {
    int64_t v = local;
    check(ncclAllReduce(&v, &v, 1, ncclInt64, ncclSum, comm_, nullptr), "ncclAllReduce (error count)");
    return v;
  }

  void printHeader() {
    RankRecord mine{};
    mine.rank = env_.rank;
    mine.pid = static_cast<int32_t>(getpid());
    std::snprintf(mine.host, sizeof mine.host, "%s", hostName().c_str());
    std::vector<RankRecord> all(static_cast<size_t>(env_.size));
    check(ncclAllGather(&mine, all.data(), sizeof mine, ncclUint8, comm_, nullptr), "ncclAllGather (header)");
    if (env_.rank != 0) return;
    std::printf("# %s: %s\n", tool_, spec_.name);
    std::printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
                "agg iters: %d validation: %d graph: 0\n",
                opts_.nThreads, opts_.nGpus, opts_.minBytes, opts_.maxBytes,
                opts_.stepFactor > 1 ? opts_.stepFactor : opts_.stepBytes,
                opts_.stepFactor > 1 ? "factor" : "bytes", opts_.warmupIters, opts_.iters, opts_.aggIters,
                opts_.check);
    if (opts_.blocking) std::printf("# Blocking Enabled: barrier after each collective\n");
    for (const std::string& flag : opts_.ignored) std::printf("# Ignored (no effect here): %s\n", flag.c_str());
    std::printf("#\n");
    std::printf("# Library: %s\n", loadedLibraryDescription().c_str());
    const char* commId = std::getenv("NCCL_COMM_ID");
    std::printf("# Ranks: %d from %s%s%s\n", env_.size, env_.source.c_str(), commId ? ", NCCL_COMM_ID=" : "",
                commId ? commId : "");
    if (!commIdNote_.empty()) std::printf("# Set %s\n", commIdNote_.c_str());
    std::printf("# Memory: host\n");
    std::printf("# Using devices\n");
    for (const RankRecord& r : all)
      std::printf("#  Rank %2d Group  0 Pid %6d on %10.56s memory host\n", r.rank, r.pid, r.host);
    std::printf("#\n");
    std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place\n", "", "", "",
                "", "");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "",
                "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);
  }

  struct Pointers {
    unsigned char* send;
    unsigned char* recv;
    size_t usedRecvBytes;  // the receive allocation's used prefix (guard behind it)
  };

  Pointers pointersFor(const CollCounts& c, size_t elt, bool inPlace) const {
    const size_t rank = static_cast<size_t>(env_.rank);
    if (!inPlace) return {send_.get(), recv_.get(), c.recvCount * elt};
    const size_t sendAt = c.sendInPlaceOffset * rank * elt;
    const size_t recvAt = c.recvInPlaceOffset * rank * elt;
    return {recv_.get() + sendAt, recv_.get() + recvAt,
            std::max(sendAt + c.sendCount * elt, recvAt + c.recvCount * elt)};
  }

  void runOnce(const TypeInfo& t, ncclRedOp_t op, int root, const CollCounts& c, const Pointers& p) {
    const CollArgs args{p.send, p.recv, c.paramCount, t.type, op, root, env_.rank, env_.size, comm_};
    check(spec_.run(args), spec_.name);
  }

  void warmup(const TypeInfo& t, ncclRedOp_t op, int root, size_t bytes) {
    const CollCounts c = spec_.counts(bytes / t.size, env_.size);
    const Pointers p = pointersFor(c, t.size, false);
    for (int i = 0; i < opts_.warmupIters; ++i) runOnce(t, op, root, c, p);
  }

  int64_t checkOnce(const TypeInfo& t, ncclRedOp_t op, int root, const CollCounts& c, bool inPlace) {
    const Pointers p = pointersFor(c, t.size, inPlace);
    const DataPattern pat{&t, op, spec_.hasOp, env_.size, ++seed_};
    const size_t sendBytes = c.sendCount * t.size;
    // Poison everything the collective should write, then lay out the inputs.
    fillGuard(recv_.get(), p.usedRecvBytes + kGuardBytes);
    if (!inPlace) fillGuard(p.send + sendBytes, kGuardBytes);
    fillInput(pat, env_.rank, p.send, c.sendCount);
    runOnce(t, op, root, c, p);

    const int rank = env_.rank, n = env_.size;
    const auto expectAt = [&](size_t i) { return spec_.expect(rank, n, root, i, c); };
    int64_t wrong = countWrong(pat, p.recv, c.recvCount, expectAt);
    wrong += countGuardDamage(recv_.get() + p.usedRecvBytes, kGuardBytes);
    if (!inPlace) {
      // The send buffer is input only.
      wrong += countWrong(pat, p.send, c.sendCount,
                          [rank](size_t i) { return Expect{Expect::kCopy, rank, i}; });
      wrong += countGuardDamage(p.send + sendBytes, kGuardBytes);
    }
    return wrong;
  }

  Measurement measure(const TypeInfo& t, ncclRedOp_t op, int root, const CollCounts& c, bool inPlace) {
    const Pointers p = pointersFor(c, t.size, inPlace);
    runOnce(t, op, root, c, p);
    barrier();

    const auto start = std::chrono::steady_clock::now();
    for (int it = 0; it < opts_.iters; ++it) {
      if (opts_.aggIters > 1) check(ncclGroupStart(), "ncclGroupStart");
      for (int a = 0; a < opts_.aggIters; ++a) runOnce(t, op, root, c, p);
      if (opts_.aggIters > 1) check(ncclGroupEnd(), "ncclGroupEnd");
      if (opts_.blocking) barrier();
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int ops = std::max(1, opts_.iters * opts_.aggIters);
    const double seconds = combineTime(opts_.iters > 0 ? elapsed / ops : 0.0);

    Measurement m;
    m.usec = seconds * 1e6;
    if (seconds > 0) {
      m.algbw = static_cast<double>(c.paramCount * t.size) * spec_.algbwRanks(env_.size) / 1e9 / seconds;
      m.busbw = m.algbw * spec_.busFactor(env_.size);
    }
    if (opts_.check > 0 && (!inPlace || spec_.checkInPlace)) {
      m.wrong = 0;
      for (int i = 0; i < opts_.check && m.wrong == 0; ++i)
        m.wrong = sumAcrossRanks(checkOnce(t, op, root, c, inPlace));
    }
    busbwSum_ += m.busbw;
    ++busbwCount_;
    if (m.wrong > 0) wrongTotal_ += m.wrong;
    return m;
  }

  std::string formatSide(const Measurement& m) const {
    return formatResultColumns(m.usec, m.algbw, m.busbw, static_cast<long long>(m.wrong));
  }


  std::vector<size_t> sizes() const {
    std::vector<size_t> out;
    for (size_t s = opts_.minBytes; s <= opts_.maxBytes;) {
      out.push_back(s);
      const size_t next = opts_.stepFactor > 1 ? s * opts_.stepFactor : s + opts_.stepBytes;
      if (next <= s) break;  // zero start with a factor, or overflow
      s = next;
    }
    return out;
  }

  // Time on valid data of the type: leftovers of another type could be NaN
  // or denormal floats, which are slow on some CPUs. Checks leave valid data
  // behind too, so once per sweep is enough.
  void fillForTiming(const TypeInfo& t, ncclRedOp_t op) {
    const DataPattern pat{&t, op, spec_.hasOp, env_.size, 0};
    fillInput(pat, env_.rank, send_.get(), sendBytes_ / t.size);
    fillInput(pat, env_.rank, recv_.get(), recvBytes_ / t.size);
  }

  void sweep(const TypeInfo& t, ncclRedOp_t op, const char* opLabel, int root) {
    if (opts_.check > 0) fillForTiming(t, op);
    barrier();
    warmup(t, op, root, opts_.maxBytes);
    warmup(t, op, root, opts_.minBytes);
    const std::vector<size_t> all = sizes();
    for (size_t i = 0; i < all.size(); ++i) {
      const CollCounts c = spec_.counts(all[i] / t.size, env_.size);
      const Measurement outOfPlace = measure(t, op, root, c, false);
      const Measurement inPlace = measure(t, op, root, c, true);
      if (env_.rank != 0) continue;
      const size_t bytes = std::max(c.sendCount, c.recvCount) * t.size;
      std::printf("%12zu  %12zu  %8s  %6s  %6d%s%s\n", bytes, c.paramCount, t.name, opLabel, root,
                  formatSide(outOfPlace).c_str(), formatSide(inPlace).c_str());
      std::fflush(stdout);
      if (progress_)
        std::fprintf(stderr, "[%s] %s %s root %d: %zu B done (%zu/%zu)\n", tool_, t.name, opLabel, root, bytes,
                     i + 1, all.size());
    }
  }

  void sweepAll() {
    const std::vector<OpInfo> noOp = {{ncclSum, "none"}};
    for (const TypeInfo& t : opts_.types) {
      for (const OpInfo& o : spec_.hasOp ? opts_.ops : noOp) {
        if (!spec_.hasRoot) {
          sweep(t, o.op, o.name, -1);
        } else if (opts_.root >= 0) {
          sweep(t, o.op, o.name, opts_.root);
        } else {
          for (int r = 0; r < env_.size; ++r) sweep(t, o.op, o.name, r);
        }
      }
    }
  }

  int finish() {
    if (env_.rank == 0) {
      std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(wrongTotal_),
                  wrongTotal_ ? "FAILED" : "OK");
      std::printf("# Avg bus bandwidth    : %g \n", busbwCount_ ? busbwSum_ / busbwCount_ : 0.0);
      std::printf("#\n");
      std::fflush(stdout);
    }
    check(ncclCommDestroy(comm_), "ncclCommDestroy");
    comm_ = nullptr;
    return wrongTotal_ ? 1 : 0;
  }

  const CollectiveSpec& spec_;
  const Options& opts_;
  const LaunchEnv& env_;
  const char* tool_;
  const bool progress_;
  const std::string commIdNote_;
  ncclComm_t comm_ = nullptr;
  HostBuffer send_;
  HostBuffer recv_;
  size_t sendBytes_ = 0;  // used parts of the allocations (guards not counted)
  size_t recvBytes_ = 0;
  int32_t barrierWord_ = 0;
  uint64_t seed_ = 0;
  int64_t wrongTotal_ = 0;  // identical on every rank: summed across ranks
  double busbwSum_ = 0;
  int busbwCount_ = 0;
};

}  // namespace

int runPerfTool(const CollectiveSpec& spec, int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* tool = toolName(argv[0]);
  Options opts;
  std::string error;
  switch (parseOptions(argc, argv, &opts, &error)) {
    case ParseStatus::kHelp: printUsage(tool); return 0;
    case ParseStatus::kError:
      std::fprintf(stderr, "%s: %s\n", tool, error.c_str());
      std::fprintf(stderr, "Run '%s -h' for the options.\n", tool);
      return 2;
    case ParseStatus::kOk: break;
  }

  LaunchEnv env;
  if (!detectLaunchEnv(&env, &error)) {
    std::fprintf(stderr, "%s: %s\n", tool, error.c_str());
    return 2;
  }
  if (opts.nThreads > 1 || opts.nGpus > 1) {
    if (env.rank == 0)
      std::fprintf(stderr, "%s: -t %d -g %d asks for %d ranks in this process, but the tools run one rank per "
                   "process: start more processes instead (braidrun -n N %s ...)\n",
                   tool, opts.nThreads, opts.nGpus, opts.nThreads * opts.nGpus, tool);
    return 2;
  }
  if (spec.hasRoot && opts.root >= env.size) {
    if (env.rank == 0)
      std::fprintf(stderr, "%s: root %d does not exist in a job of %d ranks\n", tool, opts.root, env.size);
    return 2;
  }
  if (opts.memory == MemoryKind::kDevice) {
    if (env.rank == 0)
      std::fprintf(stderr, "%s: --memory device: this braid version moves host memory only; device memory needs "
                   "a later braid version. Use --memory host.\n", tool);
    return 2;
  }
  if (opts.memory == MemoryKind::kAuto) {
    const int gpus = cudaDeviceCount();
    if (gpus > 0 && env.rank == 0)
      std::fprintf(stderr, "%s: note: %d CUDA device(s) found, but this braid version moves host memory only: "
                   "using host memory (--memory host says so explicitly)\n", tool, gpus);
  }

  std::string note;
  if (!ensureCommId(env, &note, &error)) {
    std::fprintf(stderr, "%s: rank %d: %s\n", tool, env.rank, error.c_str());
    return 2;
  }
  PerfRun run(spec, opts, env, tool, note);
  return run.run();
}

}  // namespace braid::bench
