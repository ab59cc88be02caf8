// Every collective, datatype, reduction op and buffer layout between forked
// ranks over shared memory and over TCP, through the public API only.
//
// Each test case forks its ranks once; in one communicator they run the whole
// matrix. Inputs are pseudo-random but a pure function of (call seed, rank,
// element index), so every rank computes what every other rank sent and checks
// its own results locally. Value ranges keep results exact wherever the
// arithmetic allows it: sums of small integers that every partial sum of every
// type represents, products of +-1 and +-2, min/max of arbitrary finite values;
// avg and PreMulSum on floats are compared with a tolerance. Buffers carry
// guard bytes on both sides and out-of-place send buffers must stay unchanged.
#include <nccl.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "common/guarded_buffer.h"
#include "common/mp_harness.h"
#include "common/mp_nccl.h"
#include "common/nccl_types.h"

namespace {

using ncclt::Kind;
using ncclt::TypeInfo;
using testbuf::GuardedBuffer;
using testbuf::mix64;

constexpr cudaStream_t kHostStream = nullptr;  // host buffers: calls complete before returning
constexpr size_t kSmallCounts[] = {0, 1, 7, 1000};
constexpr size_t kLargeCount = 300000;
constexpr int kDetailsPerCall = 3;
constexpr int kMaxReportsPerRank = 40;

// ---- deterministic data ---------------------------------------------------------

uint64_t rnd(uint64_t seed, int rank, size_t index) {
  return mix64(seed ^ mix64((static_cast<uint64_t>(rank) << 48) ^ mix64(index)));
}

uint8_t rawByte(uint64_t seed, int rank, size_t byteIndex) {
  return static_cast<uint8_t>(rnd(seed, rank, byteIndex) >> 17);
}

enum class OpKind { kSum, kProd, kMax, kMin, kAvg, kPreMulSum };

struct OpSpec {
  ncclRedOp_t op;
  OpKind kind;
};

// The PreMulSum scalar: a power of two for floats (exact products), 3 for integers.
double preMulScalar(const TypeInfo& t) { return t.kind == Kind::kFloat ? 0.5 : 3.0; }

// Largest input magnitude for the sum-like ops: n of them, scaled by the
// PreMulSum scalar, still sum exactly in the type.
double sumBound(const TypeInfo& t, OpKind k, int nranks) {
  double m = std::floor(t.exactMax / nranks);
  if (k == OpKind::kPreMulSum && t.kind != Kind::kFloat) m = std::floor(m / preMulScalar(t));
  return m;
}

// Any finite value of the type (no NaN, no infinity, no -0), from random bits.
double anyValue(const TypeInfo& t, uint64_t x) {
  switch (t.type) {
    case ncclInt8: return static_cast<int8_t>(x & 0xff);
    case ncclUint8: return static_cast<double>(x & 0xff);
    case ncclInt32: return static_cast<int32_t>(static_cast<uint32_t>(x));
    case ncclUint32: return static_cast<uint32_t>(x);
    case ncclInt64: return static_cast<double>(static_cast<int64_t>(x >> 11) - (int64_t{1} << 52));
    case ncclUint64: return static_cast<double>(x >> 11);
    default:
      for (uint64_t attempt = 0;; ++attempt) {
        double v;
        if (ncclt::finiteFromBits(t, mix64(x + attempt), &v)) return v;
      }
  }
}

double tolerance(const TypeInfo& t) {
  switch (t.type) {
    case ncclFloat32: return 1e-5;
    case ncclFloat64: return 1e-12;
    case ncclFloat16:
    case ncclBfloat16: return 1e-2;
    default: return 0.15;  // fp8
  }
}

using BufferPtr = std::shared_ptr<GuardedBuffer>;
BufferPtr makeBuffer(size_t bytes) { return std::make_shared<GuardedBuffer>(bytes); }

// The check of one issued call, run once the call has completed.
using Verify = std::function<void()>;

// ---- the matrix, run by every rank in the same order ------------------------------

class CollectiveSuite {
 public:
  CollectiveSuite(ncclComm_t comm, int rank, int nranks)
      : comm_(comm), rank_(rank), n_(nranks) {
    roots_.push_back(0);
    if (nranks > 1) roots_.push_back(nranks - 1);
  }

  void runAll() {
    for (int i = 0; i < ncclt::kNumTypes; ++i) runType(ncclt::allTypes()[i]);
    runGrouped();
    runLarge();
  }

 private:
  struct Call {
    std::string what;
    uint64_t seed;
  };

  Call begin(const char* fmt, ...) {
    char text[300];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    mptest::progress("call #%llu: %s", static_cast<unsigned long long>(calls_ + 1), text);
    return Call{text, mix64(++calls_ * 0x2545F4914F6CDD1Dull)};
  }

  void fail(const Call& c, const char* fmt, ...) {
    if (reports_++ >= kMaxReportsPerRank) {
      mptest::markFailed();
      return;
    }
    char text[1500];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    mptest::expectFailed(__FILE__, __LINE__, "%s: %s", c.what.c_str(), text);
  }

  // -- data model ---------------------------------------------------------------

  double input(uint64_t seed, const TypeInfo& t, OpKind k, int r, size_t g) const {
    const uint64_t x = rnd(seed, r, g);
    switch (k) {
      case OpKind::kMax:
      case OpKind::kMin: return anyValue(t, x);
      case OpKind::kProd: {
        // |product| <= 2^twos: int8 stops at 2^6, uint8 at 2^7.
        const int twos = t.type == ncclInt8 ? 6 : t.type == ncclUint8 ? 7 : n_;
        const double mag = (r < twos && (x & 1)) ? 2.0 : 1.0;
        return (t.kind != Kind::kUnsigned && (x & 2)) ? -mag : mag;
      }
      default: {
        const double m = sumBound(t, k, n_);
        const uint64_t span = static_cast<uint64_t>(t.kind == Kind::kUnsigned ? m + 1 : 2 * m + 1);
        const double v = static_cast<double>(x % span);
        return t.kind == Kind::kUnsigned ? v : v - m;
      }
    }
  }

  double expected(uint64_t seed, const TypeInfo& t, OpKind k, size_t g) const {
    double acc = input(seed, t, k, 0, g);
    if (k == OpKind::kPreMulSum) acc *= preMulScalar(t);
    for (int r = 1; r < n_; ++r) {
      const double x = input(seed, t, k, r, g);
      switch (k) {
        case OpKind::kSum:
        case OpKind::kAvg: acc += x; break;
        case OpKind::kProd: acc *= x; break;
        case OpKind::kMax: acc = std::max(acc, x); break;
        case OpKind::kMin: acc = std::min(acc, x); break;
        case OpKind::kPreMulSum: acc += x * preMulScalar(t); break;
      }
    }
    if (k == OpKind::kAvg) {
      // NCCL: floats premultiply by 1/n (compared with a tolerance); integers
      // sum, then divide truncating.
      if (t.kind == Kind::kFloat)
        acc /= n_;
      else if (t.kind == Kind::kSigned)
        acc = static_cast<double>(static_cast<int64_t>(acc) / n_);
      else
        acc = static_cast<double>(static_cast<uint64_t>(acc) / static_cast<uint64_t>(n_));
    }
    return ncclt::quantize(t, acc);
  }

  bool matches(const TypeInfo& t, OpKind k, double got, double want) const {
    const bool approximate =
        t.kind == Kind::kFloat && (k == OpKind::kAvg || k == OpKind::kPreMulSum);
    if (!approximate) return got == want;
    const double bound = tolerance(t) * (std::fabs(want) + sumBound(t, k, n_));
    return std::fabs(got - want) <= bound;
  }

  std::string inputsText(uint64_t seed, const TypeInfo& t, OpKind k, size_t g) const {
    std::string s;
    for (int r = 0; r < n_; ++r) {
      char v[48];
      std::snprintf(v, sizeof(v), "%sr%d=%.9g", r ? " " : "", r, input(seed, t, k, r, g));
      s += v;
    }
    return s;
  }

  void fillInputs(uint64_t seed, const TypeInfo& t, OpKind k, void* buf, size_t count, size_t g0) {
    for (size_t j = 0; j < count; ++j) ncclt::store(t, buf, j, input(seed, t, k, rank_, g0 + j));
  }

  void checkReduced(const Call& c, const TypeInfo& t, OpKind k, const void* out, size_t count,
                    size_t g0) {
    size_t bad = 0;
    for (size_t j = 0; j < count; ++j) {
      const double want = expected(c.seed, t, k, g0 + j);
      const double got = ncclt::load(t, out, j);
      if (matches(t, k, got, want)) continue;
      if (bad < kDetailsPerCall)
        fail(c, "element %zu: got %.9g, want %.9g (inputs %s)", j, got, want,
             inputsText(c.seed, t, k, g0 + j).c_str());
      bad++;
    }
    if (bad > kDetailsPerCall) fail(c, "%zu of %zu elements wrong", bad, count);
  }

  void fillRaw(uint64_t seed, uint8_t* buf, size_t bytes, int r, size_t offset) {
    for (size_t b = 0; b < bytes; ++b) buf[b] = rawByte(seed, r, offset + b);
  }

  void checkRaw(const Call& c, const char* part, const uint8_t* out, size_t bytes, int fromRank,
                size_t offset) {
    size_t bad = 0, first = 0;
    for (size_t b = 0; b < bytes; ++b) {
      if (out[b] == rawByte(c.seed, fromRank, offset + b)) continue;
      if (bad++ == 0) first = b;
    }
    if (bad)
      fail(c, "%s: %zu of %zu bytes wrong, first at byte %zu: got 0x%02x, want 0x%02x (data of rank %d)",
           part, bad, bytes, first, out[first], rawByte(c.seed, fromRank, offset + first), fromRank);
  }

  void checkGuards(const Call& c, const char* name, const GuardedBuffer& b) {
    if (!b.guardsIntact()) fail(c, "%s: bytes outside the buffer were overwritten", name);
  }

  // For out-of-place calls: the send buffer must come back unchanged.
  Verify unchangedCheck(const Call& c, const BufferPtr& send) {
    auto copy = std::make_shared<std::vector<uint8_t>>(send->data(), send->data() + send->bytes());
    return [this, c, send, copy] {
      if (!std::equal(copy->begin(), copy->end(), send->data()))
        fail(c, "the send buffer was modified");
      checkGuards(c, "send buffer", *send);
    };
  }

  static Verify both(Verify a, Verify b) {
    return [a, b] {
      a();
      b();
    };
  }

  // -- one call each; the NCCL call is issued before returning -------------------

  Verify allReduce(const TypeInfo& t, const OpSpec& op, size_t count, bool inPlace) {
    const Call c = begin("AllReduce(%s, %s, count=%zu, %s)", t.name, ncclt::opName(op.op), count,
                         inPlace ? "in place" : "out of place");
    auto send = makeBuffer(count * t.size);
    fillInputs(c.seed, t, op.kind, send->data(), count, 0);
    auto recv = inPlace ? send : makeBuffer(count * t.size);
    Verify extra = inPlace ? Verify([] {}) : unchangedCheck(c, send);
    MP_NCCL_CHECK(ncclAllReduce(send->data(), recv->data(), count, t.type, op.op, comm_, kHostStream));
    return both(extra, [this, c, &t, op, count, recv] {
      checkReduced(c, t, op.kind, recv->data(), count, 0);
      checkGuards(c, "recv buffer", *recv);
    });
  }

  Verify reduce(const TypeInfo& t, const OpSpec& op, size_t count, int root, bool inPlace) {
    const Call c = begin("Reduce(%s, %s, count=%zu, root=%d, %s)", t.name, ncclt::opName(op.op),
                         count, root, inPlace ? "in place" : "out of place");
    auto send = makeBuffer(count * t.size);
    fillInputs(c.seed, t, op.kind, send->data(), count, 0);
    auto recv = inPlace ? send : makeBuffer(count * t.size);
    Verify extra = inPlace ? Verify([] {}) : unchangedCheck(c, send);
    MP_NCCL_CHECK(ncclReduce(send->data(), recv->data(), count, t.type, op.op, root, comm_, kHostStream));
    return both(extra, [this, c, &t, op, count, root, recv] {
      if (rank_ == root) checkReduced(c, t, op.kind, recv->data(), count, 0);
      checkGuards(c, "recv buffer", *recv);
    });
  }

  Verify reduceScatter(const TypeInfo& t, const OpSpec& op, size_t recvcount, bool inPlace) {
    const Call c = begin("ReduceScatter(%s, %s, recvcount=%zu, %s)", t.name, ncclt::opName(op.op),
                         recvcount, inPlace ? "in place" : "out of place");
    auto send = makeBuffer(n_ * recvcount * t.size);
    fillInputs(c.seed, t, op.kind, send->data(), n_ * recvcount, 0);
    BufferPtr recvOwner = inPlace ? send : makeBuffer(recvcount * t.size);
    uint8_t* recv = inPlace ? send->data() + rank_ * recvcount * t.size : recvOwner->data();
    Verify extra = inPlace ? Verify([] {}) : unchangedCheck(c, send);
    MP_NCCL_CHECK(ncclReduceScatter(send->data(), recv, recvcount, t.type, op.op, comm_, kHostStream));
    return both(extra, [this, c, &t, op, recvcount, recvOwner, recv] {
      checkReduced(c, t, op.kind, recv, recvcount, rank_ * recvcount);
      checkGuards(c, "recv buffer", *recvOwner);
    });
  }

  Verify allGather(const TypeInfo& t, size_t count, bool inPlace) {
    const Call c = begin("AllGather(%s, count=%zu, %s)", t.name, count,
                         inPlace ? "in place" : "out of place");
    const size_t bytes = count * t.size;
    auto recv = makeBuffer(n_ * bytes);
    BufferPtr sendOwner = inPlace ? recv : makeBuffer(bytes);
    uint8_t* send = inPlace ? recv->data() + rank_ * bytes : sendOwner->data();
    fillRaw(c.seed, send, bytes, rank_, 0);
    Verify extra = inPlace ? Verify([] {}) : unchangedCheck(c, sendOwner);
    MP_NCCL_CHECK(ncclAllGather(send, recv->data(), count, t.type, comm_, kHostStream));
    return both(extra, [this, c, bytes, recv] {
      for (int j = 0; j < n_; ++j) {
        char part[48];
        std::snprintf(part, sizeof(part), "block %d", j);
        checkRaw(c, part, recv->data() + j * bytes, bytes, j, 0);
      }
      checkGuards(c, "recv buffer", *recv);
    });
  }

  Verify broadcast(const TypeInfo& t, size_t count, int root, bool inPlace, bool legacyBcast) {
    const Call c = begin("%s(%s, count=%zu, root=%d, %s)", legacyBcast ? "Bcast" : "Broadcast",
                         t.name, count, root, inPlace ? "in place" : "out of place");
    const size_t bytes = count * t.size;
    auto send = makeBuffer(bytes);
    if (rank_ == root) fillRaw(c.seed, send->data(), bytes, root, 0);
    auto recv = inPlace ? send : makeBuffer(bytes);
    Verify extra = (inPlace || rank_ != root) ? Verify([] {}) : unchangedCheck(c, send);
    if (legacyBcast)
      MP_NCCL_CHECK(ncclBcast(recv->data(), count, t.type, root, comm_, kHostStream));
    else
      MP_NCCL_CHECK(ncclBroadcast(send->data(), recv->data(), count, t.type, root, comm_, kHostStream));
    return both(extra, [this, c, bytes, root, recv] {
      checkRaw(c, "recv buffer", recv->data(), bytes, root, 0);
      checkGuards(c, "recv buffer", *recv);
    });
  }

  Verify alltoAll(const TypeInfo& t, size_t count) {
    const Call c = begin("AlltoAll(%s, count=%zu)", t.name, count);
    const size_t bytes = count * t.size;
    auto send = makeBuffer(n_ * bytes);
    fillRaw(c.seed, send->data(), n_ * bytes, rank_, 0);
    auto recv = makeBuffer(n_ * bytes);
    Verify extra = unchangedCheck(c, send);
    MP_NCCL_CHECK(ncclAlltoAll(send->data(), recv->data(), count, t.type, comm_, kHostStream));
    return both(extra, [this, c, bytes, recv] {
      for (int j = 0; j < n_; ++j) {
        char part[48];
        std::snprintf(part, sizeof(part), "block from rank %d", j);
        checkRaw(c, part, recv->data() + j * bytes, bytes, j, rank_ * bytes);
      }
      checkGuards(c, "recv buffer", *recv);
    });
  }

  Verify gather(const TypeInfo& t, size_t count, int root) {
    const Call c = begin("Gather(%s, count=%zu, root=%d)", t.name, count, root);
    const size_t bytes = count * t.size;
    auto send = makeBuffer(bytes);
    fillRaw(c.seed, send->data(), bytes, rank_, 0);
    auto recv = makeBuffer(rank_ == root ? n_ * bytes : 0);
    Verify extra = unchangedCheck(c, send);
    MP_NCCL_CHECK(ncclGather(send->data(), recv->data(), count, t.type, root, comm_, kHostStream));
    return both(extra, [this, c, bytes, root, recv] {
      if (rank_ == root) {
        for (int j = 0; j < n_; ++j) {
          char part[48];
          std::snprintf(part, sizeof(part), "block from rank %d", j);
          checkRaw(c, part, recv->data() + j * bytes, bytes, j, 0);
        }
      }
      checkGuards(c, "recv buffer", *recv);
    });
  }

  Verify scatter(const TypeInfo& t, size_t count, int root) {
    const Call c = begin("Scatter(%s, count=%zu, root=%d)", t.name, count, root);
    const size_t bytes = count * t.size;
    auto send = makeBuffer(rank_ == root ? n_ * bytes : 0);
    if (rank_ == root) fillRaw(c.seed, send->data(), n_ * bytes, root, 0);
    auto recv = makeBuffer(bytes);
    Verify extra = unchangedCheck(c, send);
    MP_NCCL_CHECK(ncclScatter(send->data(), recv->data(), count, t.type, root, comm_, kHostStream));
    return both(extra, [this, c, bytes, root, recv] {
      checkRaw(c, "recv buffer", recv->data(), bytes, root, rank_ * bytes);
      checkGuards(c, "recv buffer", *recv);
    });
  }

  // Both directions of the ring at once, in one group (self-exchange on one rank).
  Verify sendRecvRing(const TypeInfo& t, size_t count) {
    const Call c = begin("Send/Recv ring both ways(%s, count=%zu)", t.name, count);
    const size_t bytes = count * t.size;
    const size_t kSecond = size_t{1} << 40;  // the second message draws other bytes
    const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
    auto sendFwd = makeBuffer(bytes), sendBack = makeBuffer(bytes);
    fillRaw(c.seed, sendFwd->data(), bytes, rank_, 0);
    fillRaw(c.seed, sendBack->data(), bytes, rank_, kSecond);
    auto recvFromPrev = makeBuffer(bytes), recvFromNext = makeBuffer(bytes);
    Verify extra = both(unchangedCheck(c, sendFwd), unchangedCheck(c, sendBack));
    MP_NCCL_CHECK(ncclGroupStart());
    MP_NCCL_CHECK(ncclSend(sendFwd->data(), count, t.type, next, comm_, kHostStream));
    MP_NCCL_CHECK(ncclRecv(recvFromPrev->data(), count, t.type, prev, comm_, kHostStream));
    MP_NCCL_CHECK(ncclRecv(recvFromNext->data(), count, t.type, next, comm_, kHostStream));
    MP_NCCL_CHECK(ncclSend(sendBack->data(), count, t.type, prev, comm_, kHostStream));
    MP_NCCL_CHECK(ncclGroupEnd());
    return both(extra, [this, c, bytes, next, prev, kSecond, recvFromPrev, recvFromNext] {
      checkRaw(c, "message from the previous rank", recvFromPrev->data(), bytes, prev, 0);
      checkRaw(c, "message from the next rank", recvFromNext->data(), bytes, next, kSecond);
      checkGuards(c, "recv buffer (previous)", *recvFromPrev);
      checkGuards(c, "recv buffer (next)", *recvFromNext);
    });
  }

  // -- the matrix ------------------------------------------------------------------

  void runType(const TypeInfo& t) {
    ncclRedOp_t preMul;
    unsigned char scalar[8] = {};
    ncclt::store(t, scalar, 0, preMulScalar(t));
    MP_NCCL_CHECK(ncclRedOpCreatePreMulSum(&preMul, scalar, t.type, ncclScalarHostImmediate, comm_));
    const OpSpec ops[] = {{ncclSum, OpKind::kSum}, {ncclProd, OpKind::kProd},
                          {ncclMax, OpKind::kMax}, {ncclMin, OpKind::kMin},
                          {ncclAvg, OpKind::kAvg}, {preMul, OpKind::kPreMulSum}};
    for (const OpSpec& op : ops) {
      for (size_t count : kSmallCounts) {
        for (bool inPlace : {false, true}) {
          allReduce(t, op, count, inPlace)();
          reduceScatter(t, op, count, inPlace)();
          for (int root : roots_) reduce(t, op, count, root, inPlace)();
        }
      }
    }
    MP_NCCL_CHECK(ncclRedOpDestroy(preMul, comm_));

    for (size_t count : kSmallCounts) {
      for (bool inPlace : {false, true}) {
        allGather(t, count, inPlace)();
        for (int root : roots_) broadcast(t, count, root, inPlace, false)();
      }
      for (int root : roots_) {
        broadcast(t, count, root, true, true)();
        gather(t, count, root)();
        scatter(t, count, root)();
      }
      alltoAll(t, count)();
      sendRecvRing(t, count)();
    }
  }

  // Different collectives aggregated in one group must all complete at ncclGroupEnd.
  void runGrouped() {
    const TypeInfo& f32 = ncclt::typeInfo(ncclFloat32);
    const TypeInfo& i32 = ncclt::typeInfo(ncclInt32);
    const TypeInfo& u8 = ncclt::typeInfo(ncclUint8);
    const TypeInfo& f64 = ncclt::typeInfo(ncclFloat64);
    MP_NCCL_CHECK(ncclGroupStart());
    std::vector<Verify> checks;
    checks.push_back(allReduce(f32, {ncclSum, OpKind::kSum}, 1000, false));
    checks.push_back(allGather(i32, 7, true));
    checks.push_back(broadcast(u8, 1000, n_ - 1, false, false));
    checks.push_back(reduceScatter(f64, {ncclMax, OpKind::kMax}, 7, false));
    checks.push_back(reduce(i32, {ncclMin, OpKind::kMin}, 1000, 0, true));
    checks.push_back(sendRecvRing(f32, 100));  // a nested group
    checks.push_back(alltoAll(u8, 33));
    mptest::progress("ncclGroupEnd of the aggregated group");
    MP_NCCL_CHECK(ncclGroupEnd());
    for (auto& check : checks) check();
  }

  // A few large transfers (several chunks and channels), kept few for time.
  void runLarge() {
    const TypeInfo& f32 = ncclt::typeInfo(ncclFloat32);
    const size_t perRank = std::max<size_t>(1, kLargeCount / n_);
    allReduce(f32, {ncclSum, OpKind::kSum}, kLargeCount, false)();
    allReduce(ncclt::typeInfo(ncclBfloat16), {ncclSum, OpKind::kSum}, kLargeCount, true)();
    allReduce(ncclt::typeInfo(ncclInt64), {ncclMax, OpKind::kMax}, kLargeCount, false)();
    allReduce(ncclt::typeInfo(ncclFloat8e4m3), {ncclAvg, OpKind::kAvg}, kLargeCount + 3, false)();
    reduceScatter(f32, {ncclSum, OpKind::kSum}, perRank, true)();
    reduce(f32, {ncclSum, OpKind::kSum}, kLargeCount, 0, false)();
    allGather(f32, perRank, false)();
    broadcast(ncclt::typeInfo(ncclUint8), 4 * kLargeCount + 1, n_ - 1, false, false)();
    alltoAll(ncclt::typeInfo(ncclInt32), perRank)();
    gather(ncclt::typeInfo(ncclFloat16), perRank, n_ - 1)();
    scatter(f32, perRank, 0)();
    sendRecvRing(f32, kLargeCount)();
  }

  ncclComm_t comm_;
  int rank_;
  int n_;
  std::vector<int> roots_;
  uint64_t calls_ = 0;
  int reports_ = 0;
};

// ---- the GoogleTest cases -----------------------------------------------------------

// transport "2hosts": ranks on two hosts, shared memory within each, bridged
// over TCP between them (mp_nccl.h).
struct Case {
  const char* transport;
  int nranks;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.transport << " x " << c.nranks << " ranks"; }


class MpCollectives : public ::testing::TestWithParam<Case> {};

TEST_P(MpCollectives, EveryCollectiveTypeOpCountAndLayout) {
  const Case param = GetParam();
  mptest::runRanks(
      param.nranks,
      [&param](int rank, int nranks, const ncclUniqueId& id) {
        mptest::checkRunsBraid();
        mptest::hostIdForTransport(param.transport, rank);
        ncclComm_t comm = nullptr;
        mptest::progress("ncclCommInitRank");
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        CollectiveSuite(comm, rank, nranks).runAll();
        mptest::progress("ncclCommDestroy");
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      mptest::transportOptions(param.transport, 280));
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  for (const char* transport : {"shm", "tcp"})
    for (int n : {1, 2, 3, 4, 8}) cases.push_back({transport, n});
  for (int n : {2, 3, 4}) cases.push_back({"2hosts", n});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Transports, MpCollectives, ::testing::ValuesIn(allCases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name = info.param.transport;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name + "_" + std::to_string(info.param.nranks) + "ranks";
                         });

}  // namespace
