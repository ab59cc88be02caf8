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

// One rank this thread drives (-g N: N of them): its communicator, device and
// buffers.
struct RankSlot {
  LaunchEnv env;
  ncclComm_t comm = nullptr;
  std::unique_ptr<CudaDriver> cuda;  // device memory; null for host memory
  HostBuffer send;                   // the buffers, or the device buffers' mirrors
  HostBuffer recv;
  DeviceBuffer dsend, drecv, daux;  // declared after cuda: freed before it goes
  size_t sendBytes = 0;  // used parts of the allocations (guards not counted)
  size_t recvBytes = 0;
  cudaStream_t stream() const { return cuda ? cuda->stream() : nullptr; }
};

class PerfRun {
 public:
  // commIdNote: how NCCL_COMM_ID came to be set, for the header (may be empty).
  // envs: the ranks this thread drives (one, or -g of them), with cudas[i] the
  // device whose memory rank i's buffers are in (null: host memory).
  // sharedId: the unique id when the ranks are threads of this one process
  // (null: every rank derives it from NCCL_COMM_ID).
  PerfRun(const CollectiveSpec& spec, const Options& opts, const std::vector<LaunchEnv>& envs, const char* tool,
          std::string commIdNote, std::vector<std::unique_ptr<CudaDriver>> cudas, const ncclUniqueId* sharedId)
      : spec_(spec), opts_(opts), env_(envs.front()), tool_(tool), progress_(env_.rank == 0 && progressWanted()),
        commIdNote_(std::move(commIdNote)), sharedId_(sharedId), slots_(envs.size()) {
    for (size_t i = 0; i < envs.size(); ++i) {
      slots_[i].env = envs[i];
      slots_[i].cuda = std::move(cudas[i]);
    }
  }

  ~PerfRun() {
    for (RankSlot& s : slots_)
      if (s.comm) ncclCommDestroy(s.comm);
  }

  int run() {
    join();
    allocate();
    printHeader();
    for (int cycle = 0; opts_.runCycles == 0 || cycle < opts_.runCycles; ++cycle) sweepAll();
    return finish();
  }

 private:
  bool deviceMemory() const { return slots_.front().cuda != nullptr; }

  // Prints what failed on this thread's first rank and leaves; the launcher
  // stops the others.
  [[noreturn]] void fail(const std::string& what) {
    std::fprintf(stderr, "%s: rank %d of %d: %s\n", tool_, env_.rank, env_.size, what.c_str());
    std::fflush(stdout);
    for (RankSlot& s : slots_) {
      if (s.comm) ncclCommAbort(s.comm);
      s.comm = nullptr;
    }
    // Ranks as threads: the others may be inside the library, whose statics
    // std::exit would destroy under them.
    if (opts_.nThreads > 1) std::_Exit(1);
    std::exit(1);
  }

  void check(ncclResult_t r, const char* call) {
    if (r == ncclSuccess) return;
    const char* detail = ncclGetLastError(slots_.front().comm);
    fail(std::string(call) + " failed: " + ncclGetErrorString(r) +
         (detail && *detail ? std::string(": ") + detail : std::string()));
  }

  // Runs call(slot) for every rank of this thread, in one group when there
  // are several (one thread driving several ranks must group their calls).
  // A template, not a std::function: the timed loop calls it once per
  // collective, and a std::function of runOnce's lambda (five captures) would
  // allocate on every call - time the tool would report as the library's.
  template <class Call>
  void eachRank(const Call& call, const char* what) {
    const bool group = slots_.size() > 1;
    if (group) check(ncclGroupStart(), "ncclGroupStart");
    for (RankSlot& s : slots_) check(call(s), what);
    if (group) check(ncclGroupEnd(), what);
  }

  void join() {
    ncclUniqueId id;
    if (sharedId_)
      id = *sharedId_;
    else
      check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    eachRank([&](RankSlot& s) { return ncclCommInitRank(&s.comm, s.env.size, id, s.env.rank); },
             "ncclCommInitRank");
  }

  // Sizes in elements at the largest size, over every type in the sweep.
  void allocate() {
    for (RankSlot& s : slots_) allocate(s);
  }

  void allocate(RankSlot& s) {
    size_t sendBytes = 0, recvBytes = 0;
    for (const TypeInfo& t : opts_.types) {
      const CollCounts c = spec_.counts(opts_.maxBytes / t.size, s.env.size);
      const size_t rank = static_cast<size_t>(s.env.rank);
      sendBytes = std::max(sendBytes, c.sendCount * t.size);
      recvBytes = std::max({recvBytes, c.recvCount * t.size,
                            (c.sendInPlaceOffset * rank + c.sendCount) * t.size,
                            (c.recvInPlaceOffset * rank + c.recvCount) * t.size});
    }
    s.sendBytes = sendBytes;
    s.recvBytes = recvBytes;
    s.send = allocHost(sendBytes + kGuardBytes);
    s.recv = allocHost(recvBytes + kGuardBytes);
    if (!s.send || !s.recv)
      fail("cannot allocate " + std::to_string(sendBytes + recvBytes) + " bytes of host buffers: lower -e");
    if (!s.cuda) return;
    // The small calls of the driver itself (barrier, times, error counts,
    // header) use device memory too, as NVIDIA's NCCL requires.
    const size_t auxBytes = std::max<size_t>(64, sizeof(RankRecord) * size_t(s.env.size));
    for (auto [buf, bytes] : {std::pair<DeviceBuffer*, size_t>{&s.dsend, sendBytes + kGuardBytes},
                              {&s.drecv, recvBytes + kGuardBytes}, {&s.daux, auxBytes}}) {
      std::string error;
      buf->cuda = s.cuda.get();
      if (!s.cuda->alloc(bytes, &buf->ptr, &error))
        fail("cannot allocate " + std::to_string(bytes) + " bytes of device memory: " + error + ": lower -e");
    }
  }

  void cudaCheck(bool ok, const std::string& error) {
    if (!ok) fail(error);
  }

  void sync() {
    for (RankSlot& s : slots_) {
      std::string error;
      if (s.cuda) cudaCheck(s.cuda->synchronize(&error), error);
    }
  }

  // Host memory: each rank's value in place. Device memory: through its aux
  // buffer. values[i] is rank slots_[i]'s.
  void auxCall(const std::vector<void*>& values, size_t bytes,
               const std::function<ncclResult_t(RankSlot& s, void* buf)>& call, const char* what) {
    std::string error;
    for (size_t i = 0; i < slots_.size(); ++i)
      if (slots_[i].cuda) cudaCheck(slots_[i].cuda->toDevice(slots_[i].daux.ptr, values[i], bytes, &error), error);
    eachRank([&](RankSlot& s) { return call(s, s.cuda ? s.daux.ptr : values[size_t(&s - slots_.data())]); }, what);
    sync();
    for (size_t k = 0; k < slots_.size(); ++k)
      if (slots_[k].cuda) cudaCheck(slots_[k].cuda->toHost(values[k], slots_[k].daux.ptr, bytes, &error), error);
  }

  // Each rank's value (locals[i]: slots_[i]'s), reduced (or broadcast from
  // rank 0) across every rank; the result.
  template <class T>
  T reduceAux(std::vector<T> locals, ncclDataType_t type, ncclRedOp_t op, bool broadcast, const char* what) {
    std::vector<void*> at;
    for (T& x : locals) at.push_back(&x);
    auxCall(at, sizeof(T),
            [&](RankSlot& s, void* b) {
              return broadcast ? ncclBroadcast(b, b, 1, type, 0, s.comm, s.stream())
                               : ncclAllReduce(b, b, 1, type, op, s.comm, s.stream());
            },
            what);
    return locals.front();
  }

  void barrier() {
    reduceAux(std::vector<int32_t>(slots_.size(), 0), ncclInt32, ncclSum, false, "ncclAllReduce (barrier)");
  }

  double combineTime(double seconds) {
    const std::vector<double> mine(slots_.size(), seconds);
    switch (opts_.average) {
      case 0: return reduceAux(mine, ncclFloat64, ncclSum, true, "ncclBroadcast (time)");
      case 1: return reduceAux(mine, ncclFloat64, ncclSum, false, "ncclAllReduce (time)") / env_.size;
      case 2: return reduceAux(mine, ncclFloat64, ncclMin, false, "ncclAllReduce (time)");
      default: return reduceAux(mine, ncclFloat64, ncclMax, false, "ncclAllReduce (time)");
    }
  }

  // The sum over every rank of each rank's count (locals[i]: slots_[i]'s).
  int64_t sumAcrossRanks(const std::vector<int64_t>& locals) {
    return reduceAux(locals, ncclInt64, ncclSum, false, "ncclAllReduce (error count)");
  }

  void printHeader() {
    // Each rank's record in its own block of its copy of the table (in place:
    // one buffer serves host and device memory alike).
    std::vector<std::vector<RankRecord>> tables(slots_.size(), std::vector<RankRecord>(size_t(env_.size)));
    std::vector<void*> at;
    for (size_t i = 0; i < slots_.size(); ++i) {
      const RankSlot& s = slots_[i];
      RankRecord& mine = tables[i][size_t(s.env.rank)];
      mine.rank = s.env.rank;
      mine.pid = static_cast<int32_t>(getpid());
      std::snprintf(mine.host, sizeof mine.host, "%s", hostName().c_str());
      mine.device = s.cuda ? s.cuda->device() : -1;
      at.push_back(tables[i].data());
    }
    auxCall(at, size_t(env_.size) * sizeof(RankRecord),
            [&](RankSlot& s, void* b) {
              return ncclAllGather(static_cast<char*>(b) + size_t(s.env.rank) * sizeof(RankRecord), b,
                                   sizeof(RankRecord), ncclUint8, s.comm, s.stream());
            },
            "ncclAllGather (header)");
    if (env_.rank != 0) return;
    const std::vector<RankRecord>& all = tables.front();
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
    std::printf("# Memory: %s\n", deviceMemory() ? "device" : "host");
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

  static Pointers pointersFor(const RankSlot& s, const CollCounts& c, size_t elt, bool inPlace) {
    const size_t rank = static_cast<size_t>(s.env.rank);
    unsigned char* dsend = static_cast<unsigned char*>(s.cuda ? s.dsend.ptr : s.send.get());
    unsigned char* drecv = static_cast<unsigned char*>(s.cuda ? s.drecv.ptr : s.recv.get());
    if (!inPlace) return {s.send.get(), s.recv.get(), c.recvCount * elt, dsend, drecv};
    const size_t sendAt = c.sendInPlaceOffset * rank * elt;
    const size_t recvAt = c.recvInPlaceOffset * rank * elt;
    return {s.recv.get() + sendAt, s.recv.get() + recvAt,
            std::max(sendAt + c.sendCount * elt, recvAt + c.recvCount * elt), drecv + sendAt, drecv + recvAt};
  }

  // One call of every rank of this thread (a group of them under -g).
  void runOnce(const TypeInfo& t, ncclRedOp_t op, int root, const CollCounts& c, bool inPlace) {
    eachRank(
        [&](RankSlot& s) {
          const Pointers p = pointersFor(s, c, t.size, inPlace);
          return spec_.run({p.runSend, p.runRecv, c.paramCount, t.type, op, root, s.env.rank, s.env.size, s.comm,
                            s.stream()});
        },
        spec_.name);
  }

  // Device memory: the host mirrors' first bytes to the device, or back.
  void upload(RankSlot& s, bool recv, size_t bytes) {
    if (!s.cuda) return;
    std::string error;
    cudaCheck(s.cuda->toDevice(recv ? s.drecv.ptr : s.dsend.ptr, recv ? s.recv.get() : s.send.get(), bytes, &error),
              error);
  }
  void download(RankSlot& s, bool recv, size_t bytes) {
    if (!s.cuda) return;
    std::string error;
    cudaCheck(s.cuda->toHost(recv ? s.recv.get() : s.send.get(), recv ? s.drecv.ptr : s.dsend.ptr, bytes, &error),
              error);
  }

  void warmup(const TypeInfo& t, ncclRedOp_t op, int root, size_t bytes) {
    const CollCounts c = spec_.counts(bytes / t.size, env_.size);
    for (int i = 0; i < opts_.warmupIters; ++i) runOnce(t, op, root, c, false);
  }

  // The wrong elements of every rank of this thread after one checked call.
  std::vector<int64_t> checkOnce(const TypeInfo& t, ncclRedOp_t op, int root, const CollCounts& c, bool inPlace) {
    const DataPattern pat = forWireType({&t, op, spec_.hasOp, env_.size, ++seed_});
    const size_t sendBytes = c.sendCount * t.size;
    for (RankSlot& s : slots_) {
      const Pointers p = pointersFor(s, c, t.size, inPlace);
      // Poison everything the collective should write, then lay out the inputs.
      fillGuard(s.recv.get(), p.usedRecvBytes + kGuardBytes);
      if (!inPlace) fillGuard(p.send + sendBytes, kGuardBytes);
      fillInput(pat, s.env.rank, p.send, c.sendCount);
      upload(s, true, p.usedRecvBytes + kGuardBytes);
      if (!inPlace) upload(s, false, sendBytes + kGuardBytes);
    }
    runOnce(t, op, root, c, inPlace);
    sync();
    std::vector<int64_t> wrongs;
    for (RankSlot& s : slots_) {
      const Pointers p = pointersFor(s, c, t.size, inPlace);
      download(s, true, p.usedRecvBytes + kGuardBytes);
      if (!inPlace) download(s, false, sendBytes + kGuardBytes);
      const int rank = s.env.rank, n = s.env.size;
      const auto expectAt = [&](size_t i) { return spec_.expect(rank, n, root, i, c); };
      int64_t wrong = countWrong(pat, p.recv, c.recvCount, expectAt);
      wrong += countGuardDamage(s.recv.get() + p.usedRecvBytes, kGuardBytes);
      if (!inPlace) {
        // The send buffer is input only.
        wrong += countWrong(pat, p.send, c.sendCount, [rank](size_t i) { return Expect{Expect::kCopy, rank, i}; });
        wrong += countGuardDamage(p.send + sendBytes, kGuardBytes);
      }
      wrongs.push_back(wrong);
    }
    return wrongs;
  }

  bool useGraph() const { return deviceMemory() && opts_.graphLaunches > 0; }

  // The timed calls: iters iterations of aggIters calls (one group), with a
  // barrier after each under -z.
  void timedCalls(const TypeInfo& t, ncclRedOp_t op, int root, const CollCounts& c, bool inPlace) {
    for (int it = 0; it < opts_.iters; ++it) {
      if (opts_.aggIters > 1) check(ncclGroupStart(), "ncclGroupStart");
      for (int a = 0; a < opts_.aggIters; ++a) runOnce(t, op, root, c, inPlace);
      if (opts_.aggIters > 1) check(ncclGroupEnd(), "ncclGroupEnd");
      if (opts_.blocking) barrier();
    }
  }

  Measurement measure(const TypeInfo& t, ncclRedOp_t op, int root, const CollCounts& c, bool inPlace) {
    runOnce(t, op, root, c, inPlace);
    sync();
    barrier();

    // -G: the timed calls are captured once, and the graph launched n times
    // (one rank a thread: runPerfTool refuses -G with -g).
    CudaDriver* cuda = slots_.front().cuda.get();
    CudaDriver::Graph graph;
    std::string error;
    if (useGraph())
      cudaCheck(cuda->capture([&](std::string*) { timedCalls(t, op, root, c, inPlace); return true; }, &graph, &error),
                "capturing the timed calls in a CUDA graph: " + error);
    const auto start = std::chrono::steady_clock::now();
    if (useGraph()) {
      for (int g = 0; g < opts_.graphLaunches; ++g) cudaCheck(cuda->launch(graph, &error), error);
    } else {
      timedCalls(t, op, root, c, inPlace);
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
      for (int i = 0; i < opts_.check && m.wrong == 0; ++i) m.wrong = sumAcrossRanks(checkOnce(t, op, root, c, inPlace));
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
    for (RankSlot& s : slots_) {
      fillInput(pat, s.env.rank, s.send.get(), s.sendBytes / t.size);
      fillInput(pat, s.env.rank, s.recv.get(), s.recvBytes / t.size);
      upload(s, false, s.sendBytes);
      upload(s, true, s.recvBytes);
    }
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
    for (RankSlot& slot : slots_) {
      check(ncclCommDestroy(slot.comm), "ncclCommDestroy");
      slot.comm = nullptr;
    }
    return wrongTotal_ ? 1 : 0;
  }

  const CollectiveSpec& spec_;
  const Options& opts_;
  const LaunchEnv& env_;
  const char* tool_;
  const bool progress_;
  const std::string commIdNote_;
  const ncclUniqueId* sharedId_;
  std::vector<RankSlot> slots_;
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

// Rank `g` of thread `t` of this process's `threads` threads of `gpus` ranks
// each (nccl-tests' -t and -g): ranks are numbered process by process, then
// thread by thread; a rank's GPU is its local rank's.
LaunchEnv rankEnv(const LaunchEnv& process, int threads, int gpus, int t, int g) {
  const int perProcess = threads * gpus, i = t * gpus + g;
  LaunchEnv env = process;
  env.rank = process.rank * perProcess + i;
  env.size = process.size * perProcess;
  env.localRank = process.localRank * perProcess + i;
  env.localSize = process.localSize * perProcess;
  if (threads > 1) env.source += " x " + std::to_string(threads) + " threads (-t)";
  if (gpus > 1) env.source += " x " + std::to_string(gpus) + " ranks a thread (-g)";
  return env;
}

// Thread `t`'s ranks (-g of them, each with its own stream on its local
// rank's GPU, or host memory), run to the end; `firstCuda`: rank 0's device,
// already open (or null).
int runThread(const CollectiveSpec& spec, const Options& opts, const LaunchEnv& process, int t, const char* tool,
              const std::string& note, std::unique_ptr<CudaDriver> firstCuda, bool deviceMemory,
              const ncclUniqueId* sharedId) {
  std::vector<LaunchEnv> envs;
  std::vector<std::unique_ptr<CudaDriver>> cudas;
  for (int g = 0; g < opts.nGpus; ++g) {
    envs.push_back(rankEnv(process, opts.nThreads, opts.nGpus, t, g));
    std::unique_ptr<CudaDriver> cuda = g == 0 ? std::move(firstCuda) : nullptr;
    std::string error;
    if (deviceMemory && !cuda && !(cuda = CudaDriver::open(envs.back().localRank, &error))) {
      std::fprintf(stderr, "%s: rank %d: --memory device: %s\n", tool, envs.back().rank, error.c_str());
      std::_Exit(2);
    }
    cudas.push_back(std::move(cuda));
  }
  PerfRun run(spec, opts, envs, tool, note, std::move(cudas), sharedId);
  return run.run();
}

// -t N: N threads in this process, each driving its -g ranks. A single
// process shares one unique id with its threads; processes of a job meet
// through NCCL_COMM_ID.
int runThreadRanks(const CollectiveSpec& spec, const Options& opts, const LaunchEnv& process, const char* tool,
                   const std::string& note, std::unique_ptr<CudaDriver> firstCuda, bool deviceMemory) {
  ncclUniqueId id{};
  const bool oneProcess = process.size == 1 && std::getenv("NCCL_COMM_ID") == nullptr;
  const bool shared = oneProcess && opts.nThreads * opts.nGpus > 1;
  if (shared && ncclGetUniqueId(&id) != ncclSuccess) {
    std::fprintf(stderr, "%s: ncclGetUniqueId failed: %s\n", tool, ncclGetLastError(nullptr));
    return 1;
  }
  if (opts.nThreads == 1)
    return runThread(spec, opts, process, 0, tool, note, std::move(firstCuda), deviceMemory, shared ? &id : nullptr);
  std::vector<int> status(static_cast<size_t>(opts.nThreads), 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < opts.nThreads; ++t) {
    threads.emplace_back([&, t] {
      status[static_cast<size_t>(t)] = runThread(spec, opts, process, t, tool, note,
                                                 t == 0 ? std::move(firstCuda) : nullptr, deviceMemory,
                                                 shared ? &id : nullptr);
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
  const LaunchEnv processEnv = env;
  env = rankEnv(processEnv, opts.nThreads, opts.nGpus, 0, 0);
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
  if (opts.graphLaunches > 0 && cuda && opts.nGpus > 1) {
    if (env.rank == 0)
      std::fprintf(stderr, "%s: -G with -g %d: a thread's graph would hold one rank's stream only; use -t %d\n", tool,
                   opts.nGpus, opts.nGpus * opts.nThreads);
    return 2;
  }
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
  return runThreadRanks(spec, opts, processEnv, tool, note, std::move(cuda), deviceMemory);
}

}  // namespace braid::bench
