// The measurements behind measureCalibration(): reduction and copy speed on
// this core with braid's own loops, and latency / bandwidth of the in-process
// FIFO and of TCP loopback through the real transports, between two threads.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "base/log.h"
#include "reduce/host_reduce.h"
#include "transports/inproc/inproc_transport.h"
#include "transports/tcp/tcp_transport.h"
#include "engine/calibration_measure.h"

namespace braid {

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
  const size_t count = kArithBytes / typeSize(type);
  // 0x11 bytes are small normal numbers in every floating format.
  std::vector<uint8_t> a(kArithBytes, 0x11), b(kArithBytes, 0x11), d(kArithBytes, 0);
  RedOp op = makeBuiltinOp(ncclSum, type, 2);
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

// ---- transports ----------------------------------------------------------------

PeerInfo loopbackPeer(int rank) {
  PeerInfo p{};
  p.rank = rank;
  p.cudaDev = -1;
  p.hostHash = 1;
  p.shmDomain = 1;
  p.processId = static_cast<uint64_t>(getpid());  // both "ranks" live here: inproc connects them
  p.pid = getpid();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  memcpy(p.tcpAddr, &a, sizeof(a));
  snprintf(p.hostname, sizeof(p.hostname), "calibration");
  return p;
}

struct Side {
  std::unique_ptr<SendConnection> send;
  std::unique_ptr<RecvConnection> recv;
};

// from.send -> to.recv, through the three connection phases in this thread.
Result connectOneWay(Transport& t, int fromRank, int toRank, size_t slotBytes, int nslots,
                     Deadline deadline, Side* from, Side* to) {
  ConnectRequest rreq;
  rreq.self = loopbackPeer(toRank);
  rreq.peer = loopbackPeer(fromRank);
  rreq.slotBytes = slotBytes;
  rreq.nslots = nslots;
  rreq.deadline = deadline;
  ConnectRequest sreq = rreq;
  std::swap(sreq.self, sreq.peer);
  std::unique_ptr<RecvEndpoint> ep;
  BRAID_TRY(t.listen(rreq, &ep));
  BRAID_TRY(t.connect(sreq, ep->blob(), &from->send));
  return ep->accept(&to->recv);
}

// One thread's end of the exchange: blocking send / receive of whole slots,
// driving both connections while it waits and giving the core up when idle
// (the other thread may share it).
class Pump {
 public:
  Pump(Side* side, Deadline deadline, std::atomic<bool>* failed)
      : side_(side), deadline_(deadline), failed_(failed) {}

  bool send(const void* src, size_t bytes) {
    for (unsigned idle = 0;; ++idle) {
      if (void* slot = side_->send->acquire()) {
        memcpy(slot, src, bytes);
        side_->send->post(bytes);
        return progress();
      }
      if (!wait(idle)) return false;
    }
  }

  // Copies the next slot into dst; returns its size, or -1 on failure.
  long recv(void* dst) {
    for (unsigned idle = 0;; ++idle) {
      size_t bytes = 0;
      if (const void* slot = side_->recv->peek(&bytes)) {
        memcpy(dst, slot, bytes);
        side_->recv->release();
        return static_cast<long>(bytes);
      }
      if (!wait(idle)) return -1;
    }
  }

  // Sends and receives `slots` slots of `bytes` each way, interleaved as the
  // executor does; false on failure.
  bool stream(const uint8_t* src, uint8_t* dst, size_t bytes, int slots, size_t bufBytes) {
    int sent = 0, received = 0;
    for (unsigned idle = 0; sent < slots || received < slots;) {
      bool did = false;
      if (sent < slots) {
        if (void* slot = side_->send->acquire()) {
          memcpy(slot, src + (sent * bytes) % bufBytes, bytes);
          side_->send->post(bytes);
          ++sent;
          did = true;
        }
      }
      size_t got = 0;
      if (received < slots) {
        if (const void* slot = side_->recv->peek(&got)) {
          memcpy(dst + (received * bytes) % bufBytes, slot, got);
          side_->recv->release();
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
    for (unsigned idle = 0; !side_->send->flushed(); ++idle)
      if (!wait(idle)) return false;
    return true;
  }

 private:
  bool progress() {
    if (!side_->send->progress().ok() || !side_->recv->progress().ok()) failed_->store(true);
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

  Side* side_;
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

constexpr int kBatch = 16;    // round trips timed together
constexpr int kTrials = 3;    // bandwidth trials; the best counts
constexpr int kNslots = 4;

// The echoing side: returns every small slot until told to stop, then streams.
void echoThread(Side* side, const Budget& b, Deadline deadline, std::atomic<bool>* failed) {
  Pump pump(side, deadline, failed);
  uint64_t word = 0;
  do {
    if (pump.recv(&word) < 0 || !pump.send(&word, sizeof(word))) return;
  } while (word != 0);
  const size_t buf = 4 * b.slotBytes;
  std::vector<uint8_t> src(buf, 0x5a), dst(buf);
  for (int t = 0; t < kTrials; ++t)
    if (!pump.stream(src.data(), dst.data(), b.slotBytes, b.streamSlots, buf)) return;
}

// The fastest batch: what the link can do when no other process takes the
// core (each batch already averages kBatch round trips).
double fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

Result measureLink(Transport& t, const Budget& b, LinkResult* out) {
  const Deadline deadline = Clock::now() + 2s;
  Side a, e;  // a: the measuring thread; e: the echoing thread
  BRAID_TRY(connectOneWay(t, 0, 1, b.slotBytes, kNslots, deadline, &a, &e));
  BRAID_TRY(connectOneWay(t, 1, 0, b.slotBytes, kNslots, deadline, &e, &a));
  std::atomic<bool> failed{false};
  std::thread echo(echoThread, &e, b, deadline, &failed);
  Pump pump(&a, deadline, &failed);

  std::vector<double> batches;
  auto start = Clock::now();
  uint64_t word = 1;
  bool ok = true;
  for (int rt = 0; ok && rt < b.maxRoundTrips; rt += kBatch) {
    if (rt > 0 && secondsSince(start) > b.pingSeconds) break;
    auto t0 = Clock::now();
    for (int i = 0; ok && i < kBatch; ++i) ok = pump.send(&word, sizeof(word)) && pump.recv(&word) >= 0;
    if (ok) batches.push_back(secondsSince(t0) / kBatch / 2);
  }
  word = 0;
  ok = ok && pump.send(&word, sizeof(word)) && pump.recv(&word) >= 0;

  double bestStream = 1e30;
  const size_t buf = 4 * b.slotBytes;
  std::vector<uint8_t> src(buf, 0xa5), dst(buf);
  for (int trial = 0; ok && trial < kTrials; ++trial) {
    auto t0 = Clock::now();
    ok = pump.stream(src.data(), dst.data(), b.slotBytes, b.streamSlots, buf);
    if (ok) bestStream = std::min(bestStream, secondsSince(t0));
  }
  if (!ok) failed.store(true);
  echo.join();
  if (failed.load() || batches.empty())
    return fail(ncclSystemError, "%s calibration did not complete within its time limit", t.name());
  out->alpha = fastest(batches);
  out->beta = bestStream / (static_cast<double>(b.slotBytes) * b.streamSlots);
  return Result::success();
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

Result measureCalibration(CalibrationParams* out) {
  CalibrationParams p = defaultCalibration();
  const auto t0 = Clock::now();
  constexpr double kMinPerByte = 1e-12, kMaxPerByte = 1e-7;  // 1 TB/s .. 10 MB/s
  adopt("float32 reduce", timeHostLoop(ncclFloat32, false), kMinPerByte, kMaxPerByte,
        &p.gamma[static_cast<int>(ReduceClass::Wide)]);
  adopt("float16 reduce", timeHostLoop(ncclFloat16, false), kMinPerByte, kMaxPerByte,
        &p.gamma[static_cast<int>(ReduceClass::Half)]);
  adopt("bfloat16 reduce", timeHostLoop(ncclBfloat16, false), kMinPerByte, kMaxPerByte,
        &p.gamma[static_cast<int>(ReduceClass::BFloat16)]);
  adopt("float8 reduce", timeHostLoop(ncclFloat8e4m3, false), kMinPerByte, kMaxPerByte,
        &p.gamma[static_cast<int>(ReduceClass::Fp8)]);
  adopt("copy", timeHostLoop(ncclFloat32, true), kMinPerByte, kMaxPerByte, &p.copyBeta);

  int links = 0;
  LinkResult r;
  auto inproc = makeInprocTransport();
  Result res = measureLink(*inproc, {0.015, 2048, 256 << 10, 16}, &r);
  if (res.ok()) {
    ++links;
    for (TransportClass c : {TransportClass::InProcess, TransportClass::SharedMemory}) {
      adopt("FIFO latency", r.alpha, 1e-8, 1e-3, &p.alpha[static_cast<int>(c)]);
      adopt("FIFO bandwidth", r.beta, kMinPerByte, kMaxPerByte, &p.beta[static_cast<int>(c)]);
    }
  } else {
    BRAID_INFO(kLogTuning, "calibration: %s; keeping defaults", res.message().c_str());
  }
  auto tcp = makeTcpTransport();
  res = measureLink(*tcp, {0.025, 512, 256 << 10, 8}, &r);
  if (res.ok()) {
    ++links;
    const int c = static_cast<int>(TransportClass::Tcp);
    adopt("TCP latency", r.alpha, 1e-7, 1e-2, &p.alpha[c]);
    adopt("TCP bandwidth", r.beta, kMinPerByte, kMaxPerByte, &p.beta[c]);
  } else {
    BRAID_INFO(kLogTuning, "calibration: %s; keeping defaults", res.message().c_str());
  }
  p.source = CalibrationSource::Measured;
  BRAID_INFO(kLogTuning, "calibration measured in %.1f ms", secondsSince(t0) * 1e3);
  *out = p;
  if (links == 0) return fail(ncclSystemError, "no transport could be calibrated");
  return Result::success();
}

const CalibrationParams& calibration() {
  static const CalibrationParams params = [] {
    CalibrationParams p = resolveCalibration(measureCalibration);
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

}  // namespace braid
