// The measurements behind measureCalibration(): reduction and copy speed on
// this core with braid's own loops, and latency / bandwidth of the engine's
// bulk FIFO in memory and of TCP loopback through the real transport, between
// two threads.
#include "engine/calibration_measure.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/cpu_affinity.h"
#include "base/log.h"
#include "kernels/executor/bulk_protocol.h"
#include "reduce/host_reduce.h"
#include "transports/tcp/tcp_transport.h"

namespace braid::engine {

namespace {

using namespace std::chrono_literals;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ---- reductions and copies ---------------------------------------------------

constexpr size_t kArithBytes = 1 << 20;

// Seconds per byte of hostReduce (or hostCopy when `copy`) over 1 MiB, best of 3
// after one warm-up pass that also faults the pages in.
double timeHostLoop(ncclDataType_t type, bool copy) {
  const size_t count = kArithBytes / reduce::typeSize(type);
  // 0x11 bytes are small normal numbers in every floating format.
  std::vector<uint8_t> a(kArithBytes, 0x11), b(kArithBytes, 0x11), d(kArithBytes, 0);
  reduce::RedOp op = reduce::makeBuiltinOp(ncclSum, type, 2);
  double best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {
    auto t0 = Clock::now();
    if (copy)
      hostCopy(op, d.data(), a.data(), count, false, false);
    else
      hostReduce(op, d.data(), a.data(), b.data(), count, false, false);
    if (rep > 0) best = std::min(best, secondsSince(t0));
  }
  return best / kArithBytes;
}

// ---- links ---------------------------------------------------------------------

// One thread's two ends of a two-way link: toward the other thread and from
// it. Memory (the engine's bulk FIFOs in heap memory, as ranks of one process
// or host use them) or a TCP connection over loopback.
class Link {
 public:
  virtual ~Link() = default;
  virtual void* acquire() = 0;                      // the next slot to send, or null
  virtual void post(size_t bytes) = 0;
  virtual const void* peek(size_t bytes) = 0;       // the next message of `bytes`, or null
  virtual void release() = 0;
  virtual bool progress() { return true; }          // false once the link failed
  virtual bool flushed() const { return true; }
};

// A bulk FIFO in heap memory with its two ports.
struct HeapFifo {
  HeapFifo(size_t slotBytes, uint32_t nslots)
      : layout(executor::fifoLayout(executor::Protocol::Bulk, nslots, slotBytes)), memory(layout.totalBytes, 4096) {
    char* base = reinterpret_cast<char*>(memory.data());
    executor::initFifoImage(base, layout, 0);
    send.fifo = recv.fifo = executor::fifoViewAt(base, layout);
  }
  executor::FifoLayout layout;
  AlignedBuffer memory;  // as the heap FIFO provider allocates
  executor::Port send, recv;
};

class FifoLink final : public Link {
 public:
  FifoLink(HeapFifo* out, HeapFifo* in) : out_(out->send), in_(in->recv) {}
  void* acquire() override {
    return executor::waitCredit(out_, group_, kPoll) == executor::ExecStatus::Ok ? executor::bulkSlot(out_) : nullptr;
  }
  void post(size_t bytes) override { executor::bulkPost(out_, bytes, 0, group_); }
  const void* peek(size_t bytes) override {
    const char* data = nullptr;
    return executor::bulkWaitRecv(in_, bytes, 0, &data, group_, kPoll) == executor::ExecStatus::Ok ? data : nullptr;
  }
  void release() override { executor::bulkRelease(in_, group_); }

 private:
  static constexpr executor::WaitControl kPoll{nullptr, 0, true};  // one poll, never blocks
  executor::Port& out_;
  executor::Port& in_;
  executor::HostGroup group_;
};

class ConnectionLink final : public Link {
 public:
  void* acquire() override { return send->acquire(); }
  void post(size_t bytes) override { send->post(bytes); }
  const void* peek(size_t) override {
    size_t got = 0;
    return recv->peek(&got);
  }
  void release() override { recv->release(); }
  bool progress() override { return send->progress().ok() && recv->progress().ok(); }
  bool flushed() const override { return send->flushed(); }

  std::unique_ptr<transports::SendConnection> send;
  std::unique_ptr<transports::RecvConnection> recv;
};

PeerInfo loopbackPeer(int rank) {
  PeerInfo p{};
  p.rank = rank;
  p.cudaDev = -1;
  p.hostHash = 1;
  p.shmDomain = 1;
  p.processId = static_cast<uint64_t>(getpid());
  p.pid = getpid();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  memcpy(p.tcpAddr, &a, sizeof(a));
  snprintf(p.hostname, sizeof(p.hostname), "calibration");
  return p;
}

// from.send -> to.recv over TCP loopback, through the three connection phases
// in this thread.
Result connectOneWay(transports::Transport& t, int fromRank, int toRank, size_t slotBytes, int nslots,
                     Deadline deadline, ConnectionLink* from, ConnectionLink* to) {
  transports::ConnectRequest rreq;
  rreq.self = loopbackPeer(toRank);
  rreq.peer = loopbackPeer(fromRank);
  rreq.slotBytes = slotBytes;
  rreq.nslots = nslots;
  rreq.deadline = deadline;
  transports::ConnectRequest sreq = rreq;
  std::swap(sreq.self, sreq.peer);
  std::unique_ptr<transports::RecvEndpoint> ep;
  BRAID_TRY(t.listen(rreq, &ep));
  BRAID_TRY(t.connect(sreq, ep->blob(), &from->send));
  return ep->accept(&to->recv);
}

// One thread's end of the exchange: blocking send / receive of whole slots,
// driving the link while it waits and giving the core up when idle (the
// other thread may share it).
class Pump {
 public:
  Pump(Link* link, Deadline deadline, std::atomic<bool>* failed)
      : link_(link), deadline_(deadline), failed_(failed) {}

  bool send(const void* src, size_t bytes) {
    for (unsigned idle = 0;; ++idle) {
      if (void* slot = link_->acquire()) {
        memcpy(slot, src, bytes);
        link_->post(bytes);
        return progress();
      }
      if (!wait(idle)) return false;
    }
  }

  bool recv(void* dst, size_t bytes) {
    for (unsigned idle = 0;; ++idle) {
      if (const void* slot = link_->peek(bytes)) {
        memcpy(dst, slot, bytes);
        link_->release();
        return true;
      }
      if (!wait(idle)) return false;
    }
  }

  // Sends and receives `slots` slots of `bytes` each way, interleaved as the
  // engine does; false on failure.
  bool stream(const uint8_t* src, uint8_t* dst, size_t bytes, int slots, size_t bufBytes) {
    int sent = 0, received = 0;
    for (unsigned idle = 0; sent < slots || received < slots;) {
      bool did = false;
      if (sent < slots) {
        if (void* slot = link_->acquire()) {
          memcpy(slot, src + (sent * bytes) % bufBytes, bytes);
          link_->post(bytes);
          ++sent;
          did = true;
        }
      }
      if (received < slots) {
        if (const void* slot = link_->peek(bytes)) {
          memcpy(dst + (received * bytes) % bufBytes, slot, bytes);
          link_->release();
          ++received;
          did = true;
        }
      }
      if (did) {
        idle = 0;
        if (!progress()) return false;
      } else if (!wait(idle++)) {
        return false;
      }
    }
    return flush();
  }

  bool flush() {
    for (unsigned idle = 0; !link_->flushed(); ++idle)
      if (!wait(idle)) return false;
    return true;
  }

 private:
  bool progress() {
    if (!link_->progress()) failed_->store(true);
    return !failed_->load(std::memory_order_relaxed);
  }
  bool wait(unsigned idle) {
    if (!progress()) return false;
    if ((idle & 255) == 255) {
      if (Clock::now() > deadline_) {
        failed_->store(true);
        return false;
      }
      sched_yield();
    }
    return true;
  }

  Link* link_;
  Deadline deadline_;
  std::atomic<bool>* failed_;
};

struct LinkResult {
  double alpha = 0;  // one-way latency of a small slot
  double beta = 0;   // seconds per byte each way, both directions busy
};

struct Budget {
  double pingSeconds;  // stop ping-pong after this long
  int maxRoundTrips;
  size_t slotBytes;
  int streamSlots;     // per trial and direction
};

constexpr int kTrials = 3;    // bandwidth trials; the best counts
constexpr int kNslots = 4;

// The echoing side: returns every small slot until told to stop, then streams.
void echoThread(Link* link, const Budget& b, Deadline deadline, std::atomic<bool>* failed) {
  Pump pump(link, deadline, failed);
  uint64_t word = 0;
  do {
    if (!pump.recv(&word, sizeof(word)) || !pump.send(&word, sizeof(word))) return;
  } while (word != 0);
  const size_t buf = 4 * b.slotBytes;
  std::vector<uint8_t> src(buf, 0x5a), dst(buf);
  for (int t = 0; t < kTrials; ++t)
    if (!pump.stream(src.data(), dst.data(), b.slotBytes, b.streamSlots, buf)) return;
}

// The fastest batch: what the link can do when no other process takes the
// core (each batch already averages kRoundTripBatch round trips).
double fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

// ---- placement -------------------------------------------------------------------

// The two CPUs the measuring and the echoing thread run on. Two threads that
// share one CPU (a process under taskset or in a one-CPU job slot, or a busy
// host whose scheduler stacks them) time context switches, not the link: 12 us
// per hop instead of 0.14 on a 2-core guest, a value the cache would then keep
// for every later job of the host.
struct CpuPair {
  int timer = -1;
  int echo = -1;
};

// Two CPUs a thread of this process can be pinned to: the caller's own first,
// then any other the system and this process's cpuset allow (a measurement of
// 25-100 ms, once per host, may step outside a taskset mask). Probed on a
// thread of its own, so the caller's affinity never changes. Fewer than two
// when the cpuset holds one CPU.
std::vector<int> placeableCpus() {
  std::vector<int> cpus;
  std::thread probe([&cpus] {
    std::vector<int> candidates = allowedCpus();
    const long configured = std::min<long>(sysconf(_SC_NPROCESSORS_CONF), CPU_SETSIZE);
    for (int c = 0; c < configured; ++c)
      if (std::find(candidates.begin(), candidates.end(), c) == candidates.end()) candidates.push_back(c);
    for (int c : candidates) {
      if (pinThisThread(c)) cpus.push_back(c);
      if (cpus.size() == 2) break;
    }
  });
  probe.join();
  return cpus;
}

// `a` measures, `e` echoes, each on a thread of its own pinned to its CPU.
Result measureLink(const char* what, Link* a, Link* e, const Budget& b, Deadline deadline, CpuPair cpus,
                   LinkResult* out) {
  std::atomic<bool> failed{false};
  std::thread echo([&] {
    if (pinThisThread(cpus.echo)) echoThread(e, b, deadline, &failed);
    else failed.store(true);
  });
  std::vector<double> batches;
  double bestStream = 1e30;
  std::thread timer([&] {
    if (!pinThisThread(cpus.timer)) {
      failed.store(true);
      return;
    }
    Pump pump(a, deadline, &failed);
    uint64_t word = 1;
    bool ok = true;
    batches = timeRoundTripBatches(
        [&] { return pump.send(&word, sizeof(word)) && pump.recv(&word, sizeof(word)); }, b.pingSeconds,
        b.maxRoundTrips, &ok);
    word = 0;
    ok = ok && pump.send(&word, sizeof(word)) && pump.recv(&word, sizeof(word));
    const size_t buf = 4 * b.slotBytes;
    std::vector<uint8_t> src(buf, 0xa5), dst(buf);
    for (int trial = 0; ok && trial < kTrials; ++trial) {
      auto t0 = Clock::now();
      ok = pump.stream(src.data(), dst.data(), b.slotBytes, b.streamSlots, buf);
      if (ok) bestStream = std::min(bestStream, secondsSince(t0));
    }
    if (!ok) failed.store(true);
  });
  timer.join();
  echo.join();
  if (failed.load() || batches.empty())
    return fail(ncclSystemError, "%s calibration did not complete within its time limit", what);
  out->alpha = fastest(batches);
  out->beta = bestStream / (static_cast<double>(b.slotBytes) * b.streamSlots);
  return Result::success();
}

// The engine's bulk FIFOs in heap memory: what ranks of one process or one
// host move through.
Result measureMemory(const Budget& b, CpuPair cpus, LinkResult* out) {
  HeapFifo there(b.slotBytes, kNslots), back(b.slotBytes, kNslots);
  FifoLink a(&there, &back), e(&back, &there);
  return measureLink("memory FIFO", &a, &e, b, Clock::now() + 2s, cpus, out);
}

Result measureTcp(const Budget& b, CpuPair cpus, LinkResult* out) {
  const Deadline deadline = Clock::now() + 2s;
  auto tcp = tcp::makeTcpTransport();
  ConnectionLink a, e;
  BRAID_TRY(connectOneWay(*tcp, 0, 1, b.slotBytes, kNslots, deadline, &a, &e));
  BRAID_TRY(connectOneWay(*tcp, 1, 0, b.slotBytes, kNslots, deadline, &e, &a));
  return measureLink("TCP", &a, &e, b, deadline, cpus, out);
}

bool plausible(double v, double lo, double hi) { return v >= lo && v <= hi; }

// Keeps `*slot` unless `v` is plausible.
void adopt(const char* what, double v, double lo, double hi, double* slot) {
  if (plausible(v, lo, hi)) {
    *slot = v;
    return;
  }
  BRAID_INFO(kLogTuning, "calibration: %s measured %.3g is implausible; keeping %.3g", what, v, *slot);
}

}  // namespace

std::vector<double> timeRoundTripBatches(const std::function<bool()>& roundTrip, double seconds, int maxRoundTrips,
                                         bool* ok) {
  std::vector<double> batches;
  *ok = true;
  const auto start = Clock::now();
  // The time budget ends the ping-pong only once enough batches were timed: a
  // guest whose other vCPU the hypervisor holds for 20 ms would otherwise time
  // one batch, and the cache would keep it (646 us a hop on a 2-vCPU guest,
  // about one calibration in twenty) for every later job of the host.
  for (int rt = 0; rt < maxRoundTrips; rt += kRoundTripBatch) {
    if (static_cast<int>(batches.size()) >= kMinRoundTripBatches && secondsSince(start) > seconds) break;
    const auto t0 = Clock::now();
    for (int i = 0; i < kRoundTripBatch; ++i)
      if (!roundTrip()) {
        *ok = false;
        return batches;
      }
    batches.push_back(secondsSince(t0) / kRoundTripBatch / 2);
  }
  return batches;
}

Result measureCalibrationOn(const std::vector<int>& cpus, tuning::CalibrationParams* out) {
  tuning::CalibrationParams p = tuning::defaultCalibration();
  const auto t0 = Clock::now();
  constexpr double kMinPerByte = 1e-12, kMaxPerByte = 1e-7;  // 1 TB/s .. 10 MB/s
  adopt("float32 reduce", timeHostLoop(ncclFloat32, false), kMinPerByte, kMaxPerByte,
        &p.gamma[static_cast<int>(tuning::ReduceClass::Wide)]);
  adopt("float16 reduce", timeHostLoop(ncclFloat16, false), kMinPerByte, kMaxPerByte,
        &p.gamma[static_cast<int>(tuning::ReduceClass::Half)]);
  adopt("bfloat16 reduce", timeHostLoop(ncclBfloat16, false), kMinPerByte, kMaxPerByte,
        &p.gamma[static_cast<int>(tuning::ReduceClass::BFloat16)]);
  adopt("float8 reduce", timeHostLoop(ncclFloat8e4m3, false), kMinPerByte, kMaxPerByte,
        &p.gamma[static_cast<int>(tuning::ReduceClass::Fp8)]);
  adopt("copy", timeHostLoop(ncclFloat32, true), kMinPerByte, kMaxPerByte, &p.copyBeta);

  if (cpus.size() < 2) {
    p.source = tuning::CalibrationSource::Measured;
    *out = p;
    return fail(ncclSystemError,
                "this process may run on one CPU only, so the link latencies would time context switches: "
                "the links keep their defaults");
  }
  const CpuPair pair{cpus[0], cpus[1]};
  int links = 0;
  LinkResult r;
  Result res = measureMemory({0.015, 2048, 256 << 10, 16}, pair, &r);
  if (res.ok()) {
    ++links;
    for (tuning::TransportClass c : {tuning::TransportClass::InProcess, tuning::TransportClass::SharedMemory}) {
      adopt("FIFO latency", r.alpha, 1e-8, 1e-3, &p.alpha[static_cast<int>(c)]);
      adopt("FIFO bandwidth", r.beta, kMinPerByte, kMaxPerByte, &p.beta[static_cast<int>(c)]);
    }
  } else {
    BRAID_INFO(kLogTuning, "calibration: %s; keeping defaults", res.message().c_str());
  }
  res = measureTcp({0.025, 512, 256 << 10, 8}, pair, &r);
  if (res.ok()) {
    ++links;
    const int c = static_cast<int>(tuning::TransportClass::Tcp);
    adopt("TCP latency", r.alpha, 1e-7, 1e-2, &p.alpha[c]);
    adopt("TCP bandwidth", r.beta, kMinPerByte, kMaxPerByte, &p.beta[c]);
  } else {
    BRAID_INFO(kLogTuning, "calibration: %s; keeping defaults", res.message().c_str());
  }
  p.source = tuning::CalibrationSource::Measured;
  BRAID_INFO(kLogTuning, "calibration measured in %.1f ms on CPUs %d and %d", secondsSince(t0) * 1e3, pair.timer,
             pair.echo);
  *out = p;
  if (links == 0) return fail(ncclSystemError, "no transport could be calibrated");
  return Result::success();
}

Result measureCalibration(tuning::CalibrationParams* out) { return measureCalibrationOn(placeableCpus(), out); }

const tuning::CalibrationParams& calibration() {
  static const tuning::CalibrationParams params = [] {
    tuning::CalibrationParams p = resolveCalibration(measureCalibration);
    if (logEnabled(LogLevel::Info, kLogTuning)) {
      std::string d = describeCalibration(p);
      for (char& c : d)
        if (c == '\n') c = ' ';
      BRAID_INFO(kLogTuning, "calibration (%s): %s", calibrationSourceName(p.source), d.c_str());
    }
    return p;
  }();
  return params;
}

}  // namespace braid::engine
