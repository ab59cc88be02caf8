// The driver shared by every perf tool: join the job, sweep sizes, time,
// check, print an nccl-tests style table. Only rank 0 prints the table.
#include <nccl.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/collective.h"
#include "common/cuda_driver.h"
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
  int32_t device;  // -1: host memory
  char host[52];
};
static_assert(sizeof(RankRecord) == 64, "fixed-size record for the allgather");

struct Measurement {
  double usec = 0;
  double algbw = 0;
  double busbw = 0;
  int64_t wrong = -1;  // -1: not checked
};

// A buffer of the device (null without one) with its host mirror, where data
// is laid out before a check and read back after it.
struct DeviceBuffer {
  CudaDriver* cuda = nullptr;
  void* ptr = nullptr;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (cuda) cuda->free(ptr);
  }
};

class PerfRun {
 public:
  // commIdNote: how NCCL_COMM_ID came to be set, for the header (may be empty).
  // cuda: the device whose memory the buffers are in (null: host memory).
  // sharedId: the unique id when the ranks are threads of this one process
  // (null: every rank derives it from NCCL_COMM_ID).
  PerfRun(const CollectiveSpec& spec, const Options& opts, const LaunchEnv& env, const char* tool,
          std::string commIdNote, std::unique_ptr<CudaDriver> cuda, const ncclUniqueId* sharedId)
      : spec_(spec), opts_(opts), env_(env), tool_(tool), progress_(env.rank == 0 && progressWanted()),
        commIdNote_(std::move(commIdNote)), cuda_(std::move(cuda)), sharedId_(sharedId) {}

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
    // Ranks as threads: the others may be inside the library, whose statics
    // std::exit would destroy under them.
    if (opts_.nThreads > 1) std::_Exit(1);
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
    if (sharedId_)
      id = *sharedId_;
    else
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
    if (!cuda_) return;
    // The small calls of the driver itself (barrier, times, error counts,
    // header) use device memory too, as NVIDIA's NCCL requires.
    const size_t auxBytes = std::max<size_t>(64, sizeof(RankRecord) * size_t(env_.size));
    for (auto [buf, bytes] : {std::pair<DeviceBuffer*, size_t>{&dsend_, sendBytes + kGuardBytes},
                              {&drecv_, recvBytes + kGuardBytes}, {&daux_, auxBytes}}) {
      std::string error;
      buf->cuda = cuda_.get();
      if (!cuda_->alloc(bytes, &buf->ptr, &error))
        fail("cannot allocate " + std::to_string(bytes) + " bytes of device memory: " + error + ": lower -e");
    }
  }

  void cudaCheck(bool ok, const std::string& error) {
    if (!ok) fail(error);
  }

  void sync() {
    std::string error;
    if (cuda_) cudaCheck(cuda_->synchronize(&error), error);
  }

  cudaStream_t stream() const { return cuda_ ? cuda_->stream() : nullptr; }

  // Host memory: the value in place. Device memory: through the aux buffer.
  void auxCall(void* value, size_t bytes, const std::function<ncclResult_t(void* buf)>& call, const char* what) {
    if (!cuda_) {
      check(call(value), what);
      return;
    }
    std::string error;
    cudaCheck(cuda_->toDevice(daux_.ptr, value, bytes, &error), error);
    check(call(daux_.ptr), what);
    sync();
    cudaCheck(cuda_->toHost(value, daux_.ptr, bytes, &error), error);
  }

  void allReduceAux(void* value, ncclDataType_t type, ncclRedOp_t op, size_t bytes, const char* what) {
    auxCall(value, bytes,
            [&](void* buf) { return ncclAllReduce(buf, buf, 1, type, op, comm_, stream()); }, what);
  }

  void barrier() {
    allReduceAux(&barrierWord_, ncclInt32, ncclSum, sizeof barrierWord_, "ncclAllReduce (barrier)");
  }

  double combineTime(double seconds) {
    double v = seconds;
    switch (opts_.average) {
      case 0:
        auxCall(&v, sizeof v,
                [&](void* b) { return ncclBroadcast(b, b, 1, ncclFloat64, 0, comm_, stream()); },
                "ncclBroadcast (time)");
        break;
      case 1:
        allReduceAux(&v, ncclFloat64, ncclSum, sizeof v, "ncclAllReduce (time)");
        v /= env_.size;
        break;
      case 2: allReduceAux(&v, ncclFloat64, ncclMin, sizeof v, "ncclAllReduce (time)"); break;
      default: allReduceAux(&v, ncclFloat64, ncclMax, sizeof v, "ncclAllReduce (time)"); break;
    }
    return v;
  }

  int64_t sumAcrossRanks(int64_t local) {
    int64_t v = local;
    allReduceAux(&v, ncclInt64, ncclSum, sizeof v, "ncclAllReduce (error count)");
    return v;
  }

  void printHeader() {
    RankRecord mine{};
    mine.rank = env_.rank;
    mine.pid = static_cast<int32_t>(getpid());
    std::snprintf(mine.host, sizeof mine.host, "%s", hostName().c_str());
    mine.device = cuda_ ? cuda_->device() : -1;
    std::vector<RankRecord> all(static_cast<size_t>(env_.size));
    all[size_t(env_.rank)] = mine;
    // In place (this rank's record already in its block): one buffer serves
    // host and device memory alike.
    auxCall(all.data(), all.size() * sizeof(RankRecord),
            [&](void* b) {
              return ncclAllGather(static_cast<char*>(b) + size_t(env_.rank) * sizeof(RankRecord), b,
                                   sizeof(RankRecord), ncclUint8, comm_, stream());
            },
            "ncclAllGather (header)");
    if (env_.rank != 0) return;
    std::printf("# %s: %s\n", tool_, spec_.name);
    std::printf("# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d "
                "agg iters: %d validation: %d graph: %d\n",
                opts_.nThreads, opts_.nGpus, opts_.minBytes, opts_.maxBytes,
                opts_.stepFactor > 1 ? opts_.stepFactor : opts_.stepBytes,
                opts_.stepFactor > 1 ? "factor" : "bytes", opts_.warmupIters, opts_.iters, opts_.aggIters,
                opts_.check, useGraph() ? opts_.graphLaunches : 0);
    if (opts_.blocking) std::printf("# Blocking Enabled: barrier after each collective\n");
    for (const std::string& flag : opts_.ignored) std::printf("# Ignored (no effect here): %s\n", flag.c_str());
    std::printf("#\n");
    std::printf("# Library: %s\n", loadedLibraryDescription().c_str());
    const char* commId = std::getenv("NCCL_COMM_ID");
    std::printf("# Ranks: %d from %s%s%s\n", env_.size, env_.source.c_str(), commId ? ", NCCL_COMM_ID=" : "",
                commId ? commId : "");
    if (!commIdNote_.empty()) std::printf("# Set %s\n", commIdNote_.c_str());
    std::printf("# Memory: %s\n", cuda_ ? "device" : "host");
    std::printf("# Using devices\n");
    for (const RankRecord& r : all) {
      if (r.device >= 0)
        std::printf("#  Rank %2d Group  0 Pid %6d on %10.52s device %2d\n", r.rank, r.pid, r.host, r.device);
      else
        std::printf("#  Rank %2d Group  0 Pid %6d on %10.52s memory host\n", r.rank, r.pid, r.host);
    }
    std::printf("#\n");
    std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place\n", "", "", "",
                "", "");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "",
                "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);
  }

  // Where a call's data is: `send`/`recv` in the host buffers (or their
  // mirrors), `runSend`/`runRecv` what the call gets (the same, or device
  // memory at the same offsets).
  struct Pointers {
    unsigned char* send;
    unsigned char* recv;
    size_t usedRecvBytes;  // the receive allocation's used prefix (guard behind it)
    void* runSend;
    void* runRecv;
  };

  Pointers pointersFor(const CollCounts& c, size_t elt, bool inPlace) const {
    const size_t rank = static_cast<size_t>(env_.rank);
    unsigned char* dsend = static_cast<unsigned char*>(cuda_ ? dsend_.ptr : send_.get());
    unsigned char* drecv = static_cast<unsigned char*>(cuda_ ? drecv_.ptr : recv_.get());
    if (!inPlace) return {send_.get(), recv_.get(), c.recvCount * elt, dsend, drecv};
    const size_t sendAt = c.sendInPlaceOffset * rank * elt;
    const size_t recvAt = c.recvInPlaceOffset * rank * elt;
    return {recv_.get() + sendAt, recv_.get() + recvAt,
            std::max(sendAt + c.sendCount * elt, recvAt + c.recvCount * elt), drecv + sendAt, drecv + recvAt};
  }

  void runOnce(const TypeInfo& t, ncclRedOp_t op, int root, const CollCounts& c, const Pointers& p) {
    const CollArgs args{p.runSend, p.runRecv, c.paramCount, t.type, op, root, env_.rank, env_.size, comm_, stream()};
    check(spec_.run(args), spec_.name);
  }

  // Device memory: the host mirrors' first bytes to the device, or back.
  void upload(bool recv, size_t bytes) {
    if (!cuda_) return;
    std::string error;
    cudaCheck(cuda_->toDevice(recv ? drecv_.ptr : dsend_.ptr, recv ? recv_.get() : send_.get(), bytes, &error),
              error);
  }
  void download(bool recv, size_t bytes) {
    if (!cuda_) return;
    std::string error;
    cudaCheck(cuda_->toHost(recv ? recv_.get() : send_.get(), recv ? drecv_.ptr : dsend_.ptr, bytes, &error),
              error);
  }

  void warmup(const TypeInfo& t, ncclRedOp_t op, int root, size_t bytes) {
    const CollCounts c = spec_.counts(bytes / t.size, env_.size);
    const Pointers p = pointersFor(c, t.size, false);
    for (int i = 0; i < opts_.warmupIters; ++i) runOnce(t, op, root, c, p);
  }

  int64_t checkOnce(const TypeInfo& t, ncclRedOp_t op, int root, const CollCounts& c, bool inPlace) {
    const Pointers p = pointersFor(c, t.size, inPlace);
    const DataPattern pat = forWireType({&t, op, spec_.hasOp, env_.size, ++seed_});
    const size_t sendBytes = c.sendCount * t.size;
    // Poison everything the collective should write, then lay out the inputs.
    fillGuard(recv_.get(), p.usedRecvBytes + kGuardBytes);
    if (!inPlace) fillGuard(p.send + sendBytes, kGuardBytes);
    fillInput(pat, env_.rank, p.send, c.sendCount);
    upload(true, p.usedRecvBytes + kGuardBytes);
    if (!inPlace) upload(false, sendBytes + kGuardBytes);
    runOnce(t, op, root, c, p);
    sync();
    download(true, p.usedRecvBytes + kGuardBytes);
    if (!inPlace) download(false, sendBytes + kGuardBytes);

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

  bool useGraph() const { return cuda_ && opts_.graphLaunches > 0; }

  // The timed calls: iters iterations of aggIters calls (one group), with a
  // barrier after each under -z.
  void timedCalls(const TypeInfo& t, ncclRedOp_t op, int root, const CollCounts& c, const Pointers& p) {
    for (int it = 0; it < opts_.iters; ++it) {
      if (opts_.aggIters > 1) check(ncclGroupStart(), "ncclGroupStart");
      for (int a = 0; a < opts_.aggIters; ++a) runOnce(t, op, root, c, p);
      if (opts_.aggIters > 1) check(ncclGroupEnd(), "ncclGroupEnd");
      if (opts_.blocking) barrier();
    }
  }

  Measurement measure(const TypeInfo& t, ncclRedOp_t op, int root, const CollCounts& c, bool inPlace) {
    const Pointers p = pointersFor(c, t.size, inPlace);
    runOnce(t, op, root, c, p);
    sync();
    barrier();

    // -G: the timed calls are captured once, and the graph launched n times.
    CudaDriver::Graph graph;
    std::string error;
    if (useGraph())
      cudaCheck(cuda_->capture([&](std::string*) { timedCalls(t, op, root, c, p); return true; }, &graph, &error),
                "capturing the timed calls in a CUDA graph: " + error);
    const auto start = std::chrono::steady_clock::now();
    if (useGraph()) {
      for (int g = 0; g < opts_.graphLaunches; ++g) cudaCheck(cuda_->launch(graph, &error), error);
    } else {
      timedCalls(t, op, root, c, p);
    }
    sync();  // device memory: the calls only enqueued their work
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const int ops = std::max(1, opts_.iters * opts_.aggIters * (useGraph() ? opts_.graphLaunches : 1));
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
    const DataPattern pat = forWireType({&t, op, spec_.hasOp, env_.size, 0});
    fillInput(pat, env_.rank, send_.get(), sendBytes_ / t.size);
    fillInput(pat, env_.rank, recv_.get(), recvBytes_ / t.size);
    upload(false, sendBytes_);
    upload(true, recvBytes_);
  }

  void sweep(const TypeInfo& t, ncclRedOp_t op, const char* opLabel, int root) {
    if (opts_.check > 0) fillForTiming(t, op);
    barrier();
    warmup(t, op, root, opts_.maxBytes);
    warmup(t, op, root, opts_.minBytes);
    sync();
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
        std::fprintf(stderr, "[%s] %s %s%s: %zu B done (%zu/%zu)\n", tool_, t.name, opLabel,
                     root >= 0 ? (" root " + std::to_string(root)).c_str() : "", bytes, i + 1, all.size());
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
  std::unique_ptr<CudaDriver> cuda_;  // device memory; null for host memory
  const ncclUniqueId* sharedId_;  HostBuffer send_;                   // the buffers, or the device buffers' mirrors
  HostBuffer recv_;
  DeviceBuffer dsend_, drecv_, daux_;  // declared after cuda_: freed before it goes
  size_t sendBytes_ = 0;  // used parts of the allocations (guards not counted)
  size_t recvBytes_ = 0;
  int32_t barrierWord_ = 0;
  uint64_t seed_ = 0;
  int64_t wrongTotal_ = 0;  // identical on every rank: summed across ranks
  double busbwSum_ = 0;
  int busbwCount_ = 0;
};

// Whether the loaded library moves device buffers: braid says so
// (braidSupportsDeviceBuffers); NVIDIA's NCCL always does.
bool libraryMovesDeviceMemory() {
  void* sym = dlsym(RTLD_DEFAULT, "braidSupportsDeviceBuffers");
  return sym == nullptr || reinterpret_cast<int (*)()>(sym)() == 1;
}

// --memory: host, device (the rank's local GPU, round robin), or auto:
// device where a GPU is present and the library moves device memory, as
// nccl-tests always do; host otherwise. False (after saying why) when device
// memory was asked for and cannot be had.
bool chooseMemory(MemoryKind kind, const LaunchEnv& env, const char* tool, std::unique_ptr<CudaDriver>* out) {
  if (kind == MemoryKind::kHost) return true;
  const bool gpu = cudaDeviceCount() > 0;
  if (kind == MemoryKind::kAuto && !gpu) return true;
  std::string error;
  if (!gpu) {
    error = "no CUDA device (or no CUDA driver) in this process";
  } else if (!libraryMovesDeviceMemory()) {
    error = "the loaded libbraid was built without CUDA";
  } else {
    *out = CudaDriver::open(env.localRank, &error);
    if (*out) return true;
  }
  if (kind == MemoryKind::kAuto) {
    if (env.rank == 0) std::fprintf(stderr, "%s: note: using host memory: %s\n", tool, error.c_str());
    return true;
  }
  std::fprintf(stderr, "%s: rank %d: --memory device: %s. Use --memory host.\n", tool, env.rank, error.c_str());
  return false;
}

// Rank `t` of this process's `threads` ranks (nccl-tests' -t): ranks are
// numbered process by process, and a thread's GPU is its local rank's.
LaunchEnv threadRankEnv(const LaunchEnv& process, int threads, int t) {
  LaunchEnv env = process;
  env.rank = process.rank * threads + t;
  env.size = process.size * threads;
  env.localRank = process.localRank * threads + t;
  env.localSize = process.localSize * threads;
  if (threads > 1) env.source += " x " + std::to_string(threads) + " threads (-t)";
  return env;
}

// -t N: N ranks in this process, one thread each, each with its own stream
// on its local rank's GPU (or host memory). A single process shares one
// unique id with its threads; processes of a job meet through NCCL_COMM_ID.
int runThreadRanks(const CollectiveSpec& spec, const Options& opts, const LaunchEnv& process, const char* tool,
                   const std::string& note, std::unique_ptr<CudaDriver> firstCuda, bool deviceMemory) {
  ncclUniqueId id{};
  const bool oneProcess = process.size == 1 && std::getenv("NCCL_COMM_ID") == nullptr;
  if (oneProcess && ncclGetUniqueId(&id) != ncclSuccess) {
    std::fprintf(stderr, "%s: ncclGetUniqueId failed: %s\n", tool, ncclGetLastError(nullptr));
    return 1;
  }
  std::vector<int> status(static_cast<size_t>(opts.nThreads), 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < opts.nThreads; ++t) {
    threads.emplace_back([&, t] {
      const LaunchEnv env = threadRankEnv(process, opts.nThreads, t);
      std::unique_ptr<CudaDriver> cuda = t == 0 ? std::move(firstCuda) : nullptr;
      std::string error;
      if (deviceMemory && !cuda && !(cuda = CudaDriver::open(env.localRank, &error))) {
        std::fprintf(stderr, "%s: rank %d: --memory device: %s\n", tool, env.rank, error.c_str());
        std::_Exit(2);
      }
      PerfRun run(spec, opts, env, tool, note, std::move(cuda), oneProcess ? &id : nullptr);
      status[static_cast<size_t>(t)] = run.run();
    });
  }
  for (std::thread& th : threads) th.join();
  return *std::max_element(status.begin(), status.end());
}

}  // namespace

int runPerfTool(const CollectiveSpec& spec, int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const char* tool = toolName(argv[0]);
  Options opts;
  std::string error;
  switch (parseOptions(argc, argv, &opts, &error)) {
    case ParseStatus::kHelp: std::fputs(usage(tool).c_str(), stdout); return 0;
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
  if (opts.nGpus > 1) {
    if (env.rank == 0)
      std::fprintf(stderr, "%s: -g %d asks for several GPUs per thread, but each thread is one rank on one GPU: "
                   "use -t %d (threads) or more processes (braidrun -n N %s ...)\n",
                   tool, opts.nGpus, opts.nGpus * opts.nThreads, tool);
    return 2;
  }
  const LaunchEnv processEnv = env;
  env = threadRankEnv(processEnv, opts.nThreads, 0);
  if (spec.hasRoot && opts.root >= env.size) {
    if (env.rank == 0)
      std::fprintf(stderr, "%s: root %d does not exist in a job of %d ranks\n", tool, opts.root, env.size);
    return 2;
  }
  std::unique_ptr<CudaDriver> cuda;
  if (!chooseMemory(opts.memory, env, tool, &cuda)) return 2;
  const bool deviceMemory = cuda != nullptr;
  if (opts.graphLaunches > 0 && !cuda && env.rank == 0)
    std::fprintf(stderr, "%s: note: -G %d ignored: CUDA graphs need device memory\n", tool, opts.graphLaunches);
  if (opts.graphLaunches > 0 && cuda && opts.blocking) {
    if (env.rank == 0)
      std::fprintf(stderr, "%s: -G with -z 1: a barrier after each call cannot be captured in a graph\n", tool);
    return 2;
  }
  std::string note;
  if (!ensureCommId(processEnv, &note, &error)) {
    std::fprintf(stderr, "%s: rank %d: %s\n", tool, env.rank, error.c_str());
    return 2;
  }
  if (opts.nThreads == 1) {
    PerfRun run(spec, opts, env, tool, note, std::move(cuda), nullptr);
    return run.run();
  }
  return runThreadRanks(spec, opts, processEnv, tool, note, std::move(cuda), deviceMemory);
}

}  // namespace braid::bench
