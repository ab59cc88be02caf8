// One NCCL collective call, issued by one rank and checked against a result
// computed locally from the inputs every rank generates. Shared by the thread
// suite (tests/threads) and the forked-process algorithm suite (tests/mp), so
// both check the same contract whatever schedule (ring, tree, recursive
// doubling, ...) the library picks.
//
//   collcase::Runner runner(comm, rank, nranks, {failFn, progressFn});
//   runner.run({collcase::Coll::kAllReduce, ncclFloat32, ncclSum, 1000});
//
// Contract:
//  - Every rank must run the same sequence of calls: the data of call k is a
//    pure function of (k, rank, element index), so each rank knows what its
//    peers sent without talking to them.
//  - Reduction inputs are integers chosen so that every partial sum in every
//    order is exact in the type: sum and max results are compared exactly,
//    whatever order the algorithm adds in. Integer avg is sum-then-truncating-
//    divide (exact); float avg is compared against a rounding-error bound
//    derived for the worst order (see avgBound). For narrow floats avg inputs
//    are sparse (at most 3 non-zero contributions per element), because the
//    bound for P dense narrow-float terms is too loose to catch anything.
//  - Data-movement collectives (allgather, broadcast, alltoall, gather,
//    scatter, send/recv) carry pseudo-random bytes and are compared bytewise.
//  - Every buffer has guard bytes on both sides; send buffers of out-of-place
//    calls must come back unchanged; buffers NCCL does not write (recvbuff of
//    reduce/gather on non-roots) must come back unchanged.
#ifndef BRAID_TESTS_COMMON_COLL_CASES_H_
#define BRAID_TESTS_COMMON_COLL_CASES_H_

#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/guarded_buffer.h"
#include "common/nccl_types.h"

namespace collcase {

enum class Coll {
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kReduce,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecvRing,  // ncclSend to rank+1 and ncclRecv from rank-1 in one group
};

inline const char* collName(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "AllReduce";
    case Coll::kReduceScatter: return "ReduceScatter";
    case Coll::kAllGather: return "AllGather";
    case Coll::kBroadcast: return "Broadcast";
    case Coll::kReduce: return "Reduce";
    case Coll::kAlltoAll: return "AlltoAll";
    case Coll::kGather: return "Gather";
    case Coll::kScatter: return "Scatter";
    case Coll::kSendRecvRing: return "SendRecvRing";
  }
  return "?";
}

inline bool isReduction(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kReduce;
}
inline bool hasRoot(Coll c) {
  return c == Coll::kBroadcast || c == Coll::kReduce || c == Coll::kGather || c == Coll::kScatter;
}
inline bool supportsInPlace(Coll c) {
  return c == Coll::kAllReduce || c == Coll::kReduceScatter || c == Coll::kAllGather ||
         c == Coll::kBroadcast || c == Coll::kReduce;
}

struct Call {
  Coll coll = Coll::kAllReduce;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;  // reductions only
  size_t count = 0;          // NCCL's count argument (recvcount, sendcount, per peer)
  int root = 0;              // rooted collectives only
  bool inPlace = false;
};

inline std::string describe(const Call& c) {
  char text[200];
  int n = std::snprintf(text, sizeof(text), "%s(%s", collName(c.coll), ncclt::typeInfo(c.type).name);
  if (isReduction(c.coll)) n += std::snprintf(text + n, sizeof(text) - n, ", %s", ncclt::opName(c.op));
  n += std::snprintf(text + n, sizeof(text) - n, ", count=%zu", c.count);
  if (hasRoot(c.coll)) n += std::snprintf(text + n, sizeof(text) - n, ", root=%d", c.root);
  std::snprintf(text + n, sizeof(text) - n, "%s)", c.inPlace ? ", in place" : "");
  return text;
}

// ---- deterministic data ---------------------------------------------------------

using testbuf::mix64;

inline uint64_t rnd(uint64_t seed, int rank, size_t index) {
  return mix64(seed ^ (static_cast<uint64_t>(rank) * 0xD6E8FEB86659FD93ull) ^
               (static_cast<uint64_t>(index) * 0x9FB21C651E98DF25ull));
}

// Byte `offset` of rank r's send data in a data-movement call.
inline uint8_t dataByte(uint64_t seed, int rank, size_t offset) {
  return static_cast<uint8_t>(rnd(seed, rank, offset / 8) >> (8 * (offset % 8)));
}

// Integer-valued reduction inputs and the exact expected result.
class ValueModel {
 public:
  ValueModel(const ncclt::TypeInfo& t, ncclRedOp_t op, int nranks)
      : t_(t), op_(op), n_(nranks) {
    const bool narrow = ncclt::isNarrowFloat(t.type);
    sparse_ = op == ncclAvg && narrow;
    if (op == ncclMax || op == ncclMin) {
      bound_ = t.exactMax;  // any representable integer: no arithmetic happens
    } else if (sparse_) {
      bound_ = std::floor(t.exactMax / 3);
    } else {
      bound_ = std::floor(t.exactMax / nranks);
    }
    if (t.kind == ncclt::Kind::kUnsigned) lo_ = 0;
    else lo_ = -bound_;
  }

  bool contributes(int rank, size_t g) const {
    if (!sparse_) return true;
    const int k = std::max(1, n_ / 2);  // at most 3 ranks r with (r + g) % k == 0
    return (static_cast<size_t>(rank) + g) % static_cast<size_t>(k) == 0;
  }

  double input(uint64_t seed, int rank, size_t g) const {
    if (!contributes(rank, g)) return 0;
    const uint64_t span = static_cast<uint64_t>(bound_ - lo_) + 1;
    return lo_ + static_cast<double>(rnd(seed, rank, g) % span);
  }

  // The expected value of element g and the allowed absolute error.
  std::pair<double, double> expected(uint64_t seed, size_t g) const {
    double acc = input(seed, 0, g), absSum = std::fabs(acc);
    int nonzero = acc != 0;
    for (int r = 1; r < n_; ++r) {
      const double x = input(seed, r, g);
      absSum += std::fabs(x);
      nonzero += x != 0;
      acc = (op_ == ncclMax) ? std::max(acc, x) : (op_ == ncclMin) ? std::min(acc, x) : acc + x;
    }
    if (op_ != ncclAvg) return {acc, 0.0};
    if (t_.kind == ncclt::Kind::kSigned) return {static_cast<double>(static_cast<int64_t>(acc) / n_), 0.0};
    if (t_.kind == ncclt::Kind::kUnsigned)
      return {static_cast<double>(static_cast<uint64_t>(acc) / static_cast<uint64_t>(n_)), 0.0};
    return {acc / n_, avgBound(absSum, nonzero)};
  }

  double inputBound() const { return bound_; }

 private:
  // Float avg computed as sum of x_i * fl(1/n) (NCCL) or as fl(sum)/n, in any
  // order: each product is off by at most ~2u|x_i|/n, and each of the (c - 1)
  // additions that involve two non-zero terms by at most u*S/n, where S is the
  // sum of |x_i| and c the number of non-zero terms. Twice that, for safety.
  double avgBound(double absSum, int nonzero) const {
    const double u = unitRoundoff();
    return 2.0 * (nonzero + 2) * u * absSum / n_ + u * u;
  }
  double unitRoundoff() const {
    switch (t_.type) {
      case ncclFloat32: return std::ldexp(1.0, -24);
      case ncclFloat64: return std::ldexp(1.0, -53);
      case ncclFloat16: return std::ldexp(1.0, -11);
      case ncclBfloat16: return std::ldexp(1.0, -8);
      case ncclFloat8e4m3: return std::ldexp(1.0, -4);
      default: return std::ldexp(1.0, -3);
    }
  }

  const ncclt::TypeInfo& t_;
  ncclRedOp_t op_;
  int n_;
  bool sparse_ = false;
  double bound_ = 0;
  double lo_ = 0;
};

// ---- buffers ----------------------------------------------------------------------

using testbuf::GuardedBuffer;

// ---- the runner -------------------------------------------------------------------

struct Reporter {
  std::function<void(const std::string&)> fail;      // one failed expectation
  std::function<void(const std::string&)> progress;  // optional: the call about to be issued
};

class Runner {
 public:
  static constexpr int kDetailsPerCall = 3;

  Runner(ncclComm_t comm, int rank, int nranks, Reporter reporter)
      : comm_(comm), rank_(rank), n_(nranks), rep_(std::move(reporter)) {}

  // Issues the call and checks this rank's result. Returns false when the NCCL
  // call itself failed: the ranks are then out of step and the caller stops.
  bool run(const Call& c) {
    what_ = describe(c);
    seed_ = mix64(++calls_ * 0x2545F4914F6CDD1Dull);
    if (rep_.progress) rep_.progress("call #" + std::to_string(calls_) + ": " + what_);
    return isReduction(c.coll) ? runReduction(c) : runMovement(c);
  }

  uint64_t calls() const { return calls_; }
  uint64_t failures() const { return failures_; }

 private:
  using Buf = GuardedBuffer;

  void fail(const char* fmt, ...) __attribute__((format(printf, 2, 3))) {
    failures_++;
    char text[1200];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    rep_.fail("rank " + std::to_string(rank_) + " of " + std::to_string(n_) + ", call #" +
              std::to_string(calls_) + " " + what_ + ": " + text);
  }

  bool ncclOk(ncclResult_t r, const char* fn) {
    if (r == ncclSuccess) return true;
    fail("%s returned %d (%s); ncclGetLastError: %s", fn, static_cast<int>(r),
         ncclGetErrorString(r), ncclGetLastError(comm_));
    return false;
  }

  void checkGuards(const char* name, const Buf& b) {
    if (!b.guardsIntact()) fail("%s: bytes outside the buffer were overwritten", name);
  }
  void checkUnchanged(const char* name, const Buf& b, const std::vector<uint8_t>& before) {
    if (!std::equal(before.begin(), before.end(), b.data()))
      fail("%s was modified (NCCL must not write it)", name);
    checkGuards(name, b);
  }

  // -- reductions -------------------------------------------------------------------

  void checkReduced(const ncclt::TypeInfo& t, const ValueModel& m, const uint8_t* out,
                    size_t count, size_t g0) {
    size_t bad = 0;
    for (size_t j = 0; j < count; ++j) {
      const auto want = m.expected(seed_, g0 + j);
      const double got = ncclt::load(t, out, j);
      if (std::fabs(got - want.first) <= want.second) continue;  // NaN fails too
      if (bad++ < kDetailsPerCall) {
        std::string inputs;
        for (int r = 0; r < std::min(n_, 8); ++r) {
          char v[40];
          std::snprintf(v, sizeof(v), "%sr%d=%.9g", r ? " " : "", r, m.input(seed_, r, g0 + j));
          inputs += v;
        }
        if (n_ > 8) inputs += " ...";
        fail("element %zu: got %.9g, want %.9g (+-%.3g; inputs %s)", j, got, want.first,
             want.second, inputs.c_str());
      }
    }
    if (bad > kDetailsPerCall) fail("%zu of %zu elements wrong", bad, count);
  }

  void fillInputs(const ncclt::TypeInfo& t, const ValueModel& m, uint8_t* buf, size_t count,
                  size_t g0) {
    for (size_t j = 0; j < count; ++j) ncclt::store(t, buf, j, m.input(seed_, rank_, g0 + j));
  }

  bool runReduction(const Call& c) {
    const ncclt::TypeInfo& t = ncclt::typeInfo(c.type);
    const ValueModel m(t, c.op, n_);
    const size_t cb = c.count * t.size;
    switch (c.coll) {
      case Coll::kAllReduce: {
        Buf send(cb), recvOwn(c.inPlace ? 0 : cb);
        fillInputs(t, m, send.data(), c.count, 0);
        Buf& recv = c.inPlace ? send : recvOwn;
        const auto before = send.snapshot();
        if (!ncclOk(ncclAllReduce(send.data(), recv.data(), c.count, c.type, c.op, comm_, nullptr),
                    "ncclAllReduce"))
          return false;
        checkReduced(t, m, recv.data(), c.count, 0);
        if (!c.inPlace) checkUnchanged("sendbuff", send, before);
        checkGuards("recvbuff", recv);
        return true;
      }
      case Coll::kReduce: {
        Buf send(cb), recvOwn(c.inPlace ? 0 : cb);
        fillInputs(t, m, send.data(), c.count, 0);
        Buf& recv = c.inPlace ? send : recvOwn;
        const auto sendBefore = send.snapshot();
        const auto recvBefore = recv.snapshot();
        if (!ncclOk(ncclReduce(send.data(), recv.data(), c.count, c.type, c.op, c.root, comm_, nullptr),
                    "ncclReduce"))
          return false;
        if (rank_ == c.root) {
          checkReduced(t, m, recv.data(), c.count, 0);
          checkGuards("recvbuff", recv);
        } else {
          checkUnchanged(c.inPlace ? "buffer of a non-root (in place)" : "recvbuff of a non-root",
                         recv, recvBefore);
        }
        if (!c.inPlace) checkUnchanged("sendbuff", send, sendBefore);
        return true;
      }
      case Coll::kReduceScatter: {
        Buf send(cb * n_), recvOwn(c.inPlace ? 0 : cb);
        fillInputs(t, m, send.data(), c.count * n_, 0);
        const auto before = send.snapshot();
        uint8_t* recv = c.inPlace ? send.data() + rank_ * cb : recvOwn.data();
        if (!ncclOk(ncclReduceScatter(send.data(), recv, c.count, c.type, c.op, comm_, nullptr),
                    "ncclReduceScatter"))
          return false;
        checkReduced(t, m, recv, c.count, rank_ * c.count);
        if (!c.inPlace) {
          checkUnchanged("sendbuff", send, before);
          checkGuards("recvbuff", recvOwn);
        } else {
          checkGuards("buffer", send);
        }
        return true;
      }
      default: return false;
    }
  }

  // -- data movement ----------------------------------------------------------------

  void fillBytes(uint8_t* buf, size_t bytes, int r, size_t offset) {
    for (size_t b = 0; b < bytes; ++b) buf[b] = dataByte(seed_, r, offset + b);
  }

  void checkBytes(const char* part, const uint8_t* out, size_t bytes, int fromRank, size_t offset) {
    size_t bad = 0, first = 0;
    for (size_t b = 0; b < bytes; ++b) {
      if (out[b] == dataByte(seed_, fromRank, offset + b)) continue;
      if (bad++ == 0) first = b;
    }
    if (bad)
      fail("%s: %zu of %zu bytes wrong, first at byte %zu: got 0x%02x, want 0x%02x (data of rank %d)",
           part, bad, bytes, first, out[first], dataByte(seed_, fromRank, offset + first), fromRank);
  }

  void checkChunks(const uint8_t* out, size_t cb, size_t peerOffset) {
    for (int s = 0; s < n_; ++s) {
      const std::string part = "chunk from rank " + std::to_string(s);
      checkBytes(part.c_str(), out + s * cb, cb, s, peerOffset);
    }
  }

  bool runMovement(const Call& c) {
    const size_t cb = c.count * ncclt::typeInfo(c.type).size;
    const bool root = rank_ == c.root;
    switch (c.coll) {
      case Coll::kAllGather: {
        Buf recv(cb * n_), sendOwn(c.inPlace ? 0 : cb);
        uint8_t* send = c.inPlace ? recv.data() + rank_ * cb : sendOwn.data();
        fillBytes(send, cb, rank_, 0);
        const auto before = sendOwn.snapshot();
        if (!ncclOk(ncclAllGather(send, recv.data(), c.count, c.type, comm_, nullptr), "ncclAllGather"))
          return false;
        checkChunks(recv.data(), cb, 0);
        checkGuards("recvbuff", recv);
        if (!c.inPlace) checkUnchanged("sendbuff", sendOwn, before);
        return true;
      }
      case Coll::kBroadcast: {
        Buf send(cb), recvOwn(c.inPlace ? 0 : cb);
        if (root || !c.inPlace) fillBytes(send.data(), cb, root ? rank_ : n_ + rank_, 0);
        Buf& recv = c.inPlace ? send : recvOwn;
        const auto before = send.snapshot();
        if (!ncclOk(ncclBroadcast(send.data(), recv.data(), c.count, c.type, c.root, comm_, nullptr),
                    "ncclBroadcast"))
          return false;
        checkBytes("recvbuff", recv.data(), cb, c.root, 0);
        checkGuards("recvbuff", recv);
        if (!c.inPlace) checkUnchanged("sendbuff", send, before);
        return true;
      }
      case Coll::kAlltoAll: {
        Buf send(cb * n_), recv(cb * n_);
        fillBytes(send.data(), cb * n_, rank_, 0);
        const auto before = send.snapshot();
        if (!ncclOk(ncclAlltoAll(send.data(), recv.data(), c.count, c.type, comm_, nullptr), "ncclAlltoAll"))
          return false;
        checkChunks(recv.data(), cb, rank_ * cb);
        checkGuards("recvbuff", recv);
        checkUnchanged("sendbuff", send, before);
        return true;
      }
      case Coll::kGather: {
        Buf send(cb), recv(cb * n_);
        fillBytes(send.data(), cb, rank_, 0);
        const auto sendBefore = send.snapshot();
        const auto recvBefore = recv.snapshot();
        if (!ncclOk(ncclGather(send.data(), recv.data(), c.count, c.type, c.root, comm_, nullptr),
                    "ncclGather"))
          return false;
        if (root) {
          checkChunks(recv.data(), cb, 0);
          checkGuards("recvbuff", recv);
        } else {
          checkUnchanged("recvbuff of a non-root", recv, recvBefore);
        }
        checkUnchanged("sendbuff", send, sendBefore);
        return true;
      }
      case Coll::kScatter: {
        Buf send(cb * n_), recv(cb);
        if (root) fillBytes(send.data(), cb * n_, rank_, 0);
        const auto before = send.snapshot();
        if (!ncclOk(ncclScatter(send.data(), recv.data(), c.count, c.type, c.root, comm_, nullptr),
                    "ncclScatter"))
          return false;
        checkBytes("recvbuff", recv.data(), cb, c.root, rank_ * cb);
        checkGuards("recvbuff", recv);
        checkUnchanged("sendbuff", send, before);
        return true;
      }
      case Coll::kSendRecvRing: {
        Buf send(cb), recv(cb);
        fillBytes(send.data(), cb, rank_, 0);
        const auto before = send.snapshot();
        const int next = (rank_ + 1) % n_, prev = (rank_ + n_ - 1) % n_;
        if (!ncclOk(ncclGroupStart(), "ncclGroupStart")) return false;
        const ncclResult_t s = ncclSend(send.data(), c.count, c.type, next, comm_, nullptr);
        const ncclResult_t r = ncclRecv(recv.data(), c.count, c.type, prev, comm_, nullptr);
        const ncclResult_t e = ncclGroupEnd();
        if (!ncclOk(s, "ncclSend") || !ncclOk(r, "ncclRecv") || !ncclOk(e, "ncclGroupEnd")) return false;
        checkBytes("recvbuff", recv.data(), cb, prev, 0);
        checkGuards("recvbuff", recv);
        checkUnchanged("sendbuff", send, before);
        return true;
      }
      default: return false;
    }
  }

  ncclComm_t comm_;
  int rank_;
  int n_;
  Reporter rep_;
  std::string what_;
  uint64_t seed_ = 0;
  uint64_t calls_ = 0;
  uint64_t failures_ = 0;
};

// ---- NCCL_ALGO --------------------------------------------------------------------

// The algorithms tests force with NCCL_ALGO, and the collectives each applies to.
struct Algo {
  const char* name;  // the NCCL_ALGO value
  std::vector<Coll> colls;
};

inline const std::vector<Algo>& forcedAlgos() {
  static const std::vector<Algo> algos = {
      {"Ring", {Coll::kAllReduce, Coll::kReduceScatter, Coll::kAllGather, Coll::kBroadcast, Coll::kReduce}},
      {"Tree", {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce}},
      {"RecursiveDoubling", {Coll::kAllReduce, Coll::kAllGather}},
      {"HalvingDoubling", {Coll::kAllReduce, Coll::kReduceScatter}},
  };
  return algos;
}

}  // namespace collcase

#endif  // BRAID_TESTS_COMMON_COLL_CASES_H_
