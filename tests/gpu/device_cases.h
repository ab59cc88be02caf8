// One collective on device buffers for every rank this process drives (one
// or several ranks, each with its own communicator and stream), issued in one
// ncclGroupStart/End, then checked on host copies against a reference
// computed on the host from the inputs every rank generates.
//
// Reduction inputs are integers small enough that every partial result in
// any order is exact in the type (sparse for narrow types), so results are
// compared exactly; the rank counts tested are powers of two, so float avg is
// exact too. Data movement carries pseudo-random bytes. Every device buffer
// has guard bytes on both sides; buffers NCCL does not write must come back
// unchanged, as must send buffers of out-of-place calls.
#ifndef BRAID_TESTS_GPU_DEVICE_CASES_H_
#define BRAID_TESTS_GPU_DEVICE_CASES_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/coll_cases.h"
#include "common/nccl_types.h"

namespace devcase {

using collcase::Coll;

// kPreMulSumDevice: the same op with its scalar in device memory (ncclScalarDevice).
enum class Op { kSum, kProd, kMax, kMin, kAvg, kPreMulSum, kPreMulSumDevice };

inline bool isPreMulSum(Op op) { return op == Op::kPreMulSum || op == Op::kPreMulSumDevice; }

inline const char* opName(Op op) {
  switch (op) {
    case Op::kSum: return "sum";
    case Op::kProd: return "prod";
    case Op::kMax: return "max";
    case Op::kMin: return "min";
    case Op::kAvg: return "avg";
    case Op::kPreMulSum: return "premulsum(2)";
    case Op::kPreMulSumDevice: return "premulsum(2 in device memory)";
  }
  return "?";
}

struct Case {
  Coll coll = Coll::kAllReduce;
  ncclDataType_t type = ncclFloat32;
  Op op = Op::kSum;
  size_t count = 0;
  int root = 0;
  bool inPlace = false;
};

inline std::string describe(const Case& c) {
  char text[200];
  std::snprintf(text, sizeof text, "%s(%s%s%s, count=%zu, root=%d%s)", collcase::collName(c.coll),
                ncclt::typeInfo(c.type).name, collcase::isReduction(c.coll) ? ", " : "",
                collcase::isReduction(c.coll) ? opName(c.op) : "", c.count, c.root,
                c.inPlace ? ", in place" : "");
  return text;
}

// Every case of the matrix: collectives x datatypes x ops (reductions) x in place.
inline std::vector<Case> allCases(int nranks, size_t count) {
  const Coll colls[] = {Coll::kAllReduce, Coll::kReduceScatter, Coll::kReduce,  Coll::kAllGather,
                        Coll::kBroadcast, Coll::kAlltoAll,      Coll::kGather,  Coll::kScatter,
                        Coll::kSendRecvRing};
  std::vector<Case> cases;
  int k = 0;
  for (Coll coll : colls) {
    for (int ti = 0; ti < ncclt::kNumTypes; ++ti) {
      const ncclt::TypeInfo& t = ncclt::allTypes()[ti];
      std::vector<Op> ops = {Op::kSum};
      if (collcase::isReduction(coll)) {
        ops = {Op::kSum, Op::kProd, Op::kMax, Op::kMin, Op::kAvg};
        if (t.kind == ncclt::Kind::kFloat) ops.insert(ops.end(), {Op::kPreMulSum, Op::kPreMulSumDevice});
      }
      for (Op op : ops) {
        for (int inPlace = 0; inPlace < (collcase::supportsInPlace(coll) ? 2 : 1); ++inPlace) {
          Case c;
          c.coll = coll;
          c.type = t.type;
          c.op = op;
          c.count = count;
          c.root = (k++) % nranks;
          c.inPlace = inPlace != 0;
          cases.push_back(c);
        }
      }
    }
  }
  return cases;
}

// ---- reference values -------------------------------------------------------

class Values {
 public:
  Values(const ncclt::TypeInfo& t, Op op, int nranks, uint64_t seed) : t_(t), op_(op), n_(nranks), seed_(seed) {
    const bool additive = op == Op::kSum || op == Op::kAvg || isPreMulSum(op);
    if (additive) {
      bound_ = std::floor(t.exactMax / (2.0 * nranks));  // 2: the PreMulSum scalar
      if (bound_ < 4) {  // narrow types: at most two ranks contribute to an element
        stride_ = std::max(1, nranks / 2);
        bound_ = std::floor(t.exactMax / 4.0);
      }
    } else {
      bound_ = t.exactMax;
    }
  }

  double input(int rank, size_t g) const {
    const uint64_t r = collcase::rnd(seed_, rank, g);
    const bool sign = t_.kind != ncclt::Kind::kUnsigned;
    if (op_ == Op::kProd) {  // at most two ranks in eight contribute a 2: |product| <= 4
      if ((static_cast<size_t>(rank) + g) % 4 == 0) return 2;
      return sign && (r & 1) ? -1 : 1;
    }
    if ((static_cast<size_t>(rank) + g) % static_cast<size_t>(stride_) != 0) return 0;
    const double lo = sign ? -bound_ : 0;
    return lo + static_cast<double>(r % (static_cast<uint64_t>(bound_ - lo) + 1));
  }

  double expected(size_t g) const {
    double acc = input(0, g);
    if (isPreMulSum(op_)) acc *= 2;
    for (int r = 1; r < n_; ++r) {
      const double x = input(r, g);
      switch (op_) {
        case Op::kProd: acc *= x; break;
        case Op::kMax: acc = std::max(acc, x); break;
        case Op::kMin: acc = std::min(acc, x); break;
        case Op::kPreMulSum:
        case Op::kPreMulSumDevice: acc += 2 * x; break;
        default: acc += x; break;
      }
    }
    if (op_ != Op::kAvg) return acc;
    if (t_.kind == ncclt::Kind::kSigned) return static_cast<double>(static_cast<int64_t>(acc) / n_);
    if (t_.kind == ncclt::Kind::kUnsigned)
      return static_cast<double>(static_cast<uint64_t>(acc) / static_cast<uint64_t>(n_));
    return acc / n_;
  }

 private:
  const ncclt::TypeInfo& t_;
  Op op_;
  int n_;
  uint64_t seed_;
  double bound_ = 0;
  int stride_ = 1;
};

// ---- device buffers with guards -----------------------------------------------

constexpr size_t kGuard = 256;
constexpr uint8_t kGuardByte = 0x5A;
constexpr uint8_t kUntouchedByte = 0xA5;

// [guard | bytes | guard] in device memory, filled from host contents.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() {
    if (base_) cudaFree(base_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Host image: guard, contents, guard.
  bool init(const std::vector<uint8_t>& contents) {
    bytes_ = contents.size();
    std::vector<uint8_t> image(bytes_ + 2 * kGuard, kGuardByte);
    std::copy(contents.begin(), contents.end(), image.begin() + kGuard);
    if (cudaMalloc(&base_, image.size()) != cudaSuccess) return false;
    // From pageable memory cudaMemcpy may return before its DMA to the device
    // is done, and the ranks' non-blocking streams do not wait for the legacy
    // stream it runs on: wait for it here (on an H200 the calls otherwise
    // read zeros where the copy had not arrived yet).
    return cudaMemcpy(base_, image.data(), image.size(), cudaMemcpyHostToDevice) == cudaSuccess &&
           cudaStreamSynchronize(nullptr) == cudaSuccess;
  }
  uint8_t* data() const { return static_cast<uint8_t*>(base_) + kGuard; }
  // Contents back, and whether the guards are intact.
  bool read(std::vector<uint8_t>* contents, bool* guardsOk) const {
    std::vector<uint8_t> image(bytes_ + 2 * kGuard);
    if (cudaMemcpy(image.data(), base_, image.size(), cudaMemcpyDeviceToHost) != cudaSuccess) return false;
    contents->assign(image.begin() + kGuard, image.begin() + kGuard + bytes_);
    *guardsOk = std::all_of(image.begin(), image.begin() + kGuard, [](uint8_t b) { return b == kGuardByte; }) &&
                std::all_of(image.end() - kGuard, image.end(), [](uint8_t b) { return b == kGuardByte; });
    return true;
  }

 private:
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

// ---- the runner -----------------------------------------------------------------

struct LocalRank {
  ncclComm_t comm = nullptr;
  int rank = 0;
  cudaStream_t stream = nullptr;
};

class Runner {
 public:
  using Fail = std::function<void(const std::string&)>;
  Runner(std::vector<LocalRank> ranks, int nranks, Fail fail) : ranks_(std::move(ranks)), n_(nranks), fail_(std::move(fail)) {}

  // Issues the case on every local rank in one group, waits on the streams,
  // and checks. False when a call failed (the ranks are then out of step).
  bool run(const Case& c) {
    what_ = describe(c);
    seed_ = collcase::mix64(++calls_ * 0x2545F4914F6CDD1Dull);
    std::vector<State> st(ranks_.size());
    for (size_t i = 0; i < ranks_.size(); ++i)
      if (!prepare(c, ranks_[i].rank, &st[i])) return false;
    if (!issue(c, &st)) return false;
    bool ok = true;
    for (size_t i = 0; i < ranks_.size(); ++i) {
      const cudaError_t err = cudaStreamSynchronize(ranks_[i].stream);
      if (err != cudaSuccess) {
        report(ranks_[i].rank, std::string("cudaStreamSynchronize: ") + cudaGetErrorString(err));
        ok = false;
      }
    }
    for (size_t i = 0; ok && i < ranks_.size(); ++i) check(c, ranks_[i].rank, st[i]);
    return ok;
  }

  uint64_t failures() const { return failures_; }

 private:
  struct State {
    size_t sendBytes = 0, recvBytes = 0;
    std::vector<uint8_t> sendInit, recvInit;
    DeviceBuffer send, recv;  // recv unused in place (the call's pointers are computed)
    const void* sendPtr = nullptr;
    void* recvPtr = nullptr;
    ncclRedOp_t op = ncclSum;
    bool createdOp = false;
    DeviceBuffer scalar;  // kPreMulSumDevice: read by the call when it runs
  };

  void report(int rank, const std::string& text) {
    ++failures_;
    fail_("rank " + std::to_string(rank) + " of " + std::to_string(n_) + ", " + what_ + ": " + text);
  }

  size_t elem(const Case& c) const { return ncclt::typeInfo(c.type).size; }

  void fillReduction(const Case& c, int rank, uint8_t* buf, size_t count) {
    const ncclt::TypeInfo& t = ncclt::typeInfo(c.type);
    const Values v(t, c.op, n_, seed_);
    for (size_t g = 0; g < count; ++g) ncclt::store(t, buf, g, v.input(rank, g));
  }
  void fillBytes(int rank, uint8_t* buf, size_t bytes, size_t offset) {
    for (size_t b = 0; b < bytes; ++b) buf[b] = collcase::dataByte(seed_, rank, offset + b);
  }

  bool prepare(const Case& c, int rank, State* s) {
    const size_t cb = c.count * elem(c);
    const size_t all = cb * static_cast<size_t>(n_);
    const bool root = rank == c.root;
    switch (c.coll) {
      case Coll::kAllReduce: s->sendBytes = cb; s->recvBytes = cb; break;
      case Coll::kReduceScatter: s->sendBytes = all; s->recvBytes = cb; break;
      case Coll::kReduce: s->sendBytes = cb; s->recvBytes = cb; break;
      case Coll::kAllGather: s->sendBytes = cb; s->recvBytes = all; break;
      case Coll::kBroadcast: s->sendBytes = cb; s->recvBytes = cb; break;
      case Coll::kAlltoAll: s->sendBytes = all; s->recvBytes = all; break;
      case Coll::kGather: s->sendBytes = cb; s->recvBytes = all; break;
      case Coll::kScatter: s->sendBytes = all; s->recvBytes = cb; break;
      case Coll::kSendRecvRing: s->sendBytes = cb; s->recvBytes = cb; break;
    }
    s->sendInit.assign(s->sendBytes, 0);
    s->recvInit.assign(s->recvBytes, kUntouchedByte);
    if (collcase::isReduction(c.coll)) {
      fillReduction(c, rank, s->sendInit.data(), s->sendBytes / elem(c));
    } else if (c.coll != Coll::kScatter || root) {
      fillBytes(rank, s->sendInit.data(), s->sendBytes, 0);
    }
    // In place: one allocation; the call's pointers are inside it.
    if (c.inPlace) {
      std::vector<uint8_t> image;
      size_t sendAt = 0, recvAt = 0;
      switch (c.coll) {
        case Coll::kReduceScatter: image = s->sendInit; recvAt = rank * cb; break;
        case Coll::kAllGather:
          image = s->recvInit;
          sendAt = rank * cb;
          std::copy(s->sendInit.begin(), s->sendInit.end(), image.begin() + sendAt);
          break;
        default: image = s->sendInit; break;  // allreduce, reduce, broadcast
      }
      if (!s->send.init(image)) return cudaFailed(rank, "cudaMalloc/cudaMemcpy");
      s->sendPtr = s->send.data() + sendAt;
      s->recvPtr = s->send.data() + recvAt;
    } else {
      if (!s->send.init(s->sendInit) || !s->recv.init(s->recvInit)) return cudaFailed(rank, "cudaMalloc/cudaMemcpy");
      s->sendPtr = s->send.data();
      s->recvPtr = s->recv.data();
    }
    return true;
  }

  bool cudaFailed(int rank, const char* what) {
    report(rank, std::string(what) + " failed");
    return false;
  }

  bool ncclOk(int rank, ncclResult_t r, const char* fn) {
    if (r == ncclSuccess) return true;
    report(rank, std::string(fn) + " returned " + ncclGetErrorString(r) + "; ncclGetLastError: " +
                     ncclGetLastError(nullptr));
    return false;
  }

  ncclRedOp_t ncclOpOf(Op op) const {
    switch (op) {
      case Op::kProd: return ncclProd;
      case Op::kMax: return ncclMax;
      case Op::kMin: return ncclMin;
      case Op::kAvg: return ncclAvg;
      default: return ncclSum;
    }
  }

  bool issue(const Case& c, std::vector<State>* st) {
    for (size_t i = 0; i < ranks_.size(); ++i) {
      State& s = (*st)[i];
      s.op = ncclOpOf(c.op);
      if (isPreMulSum(c.op)) {
        std::vector<uint8_t> scalar(8, 0);
        ncclt::store(ncclt::typeInfo(c.type), scalar.data(), 0, 2.0);
        void* where = scalar.data();
        ncclScalarResidence_t residence = ncclScalarHostImmediate;
        if (c.op == Op::kPreMulSumDevice) {
          if (!s.scalar.init(scalar)) return cudaFailed(ranks_[i].rank, "cudaMalloc of the PreMulSum scalar");
          where = s.scalar.data();
          residence = ncclScalarDevice;
        }
        if (!ncclOk(ranks_[i].rank, ncclRedOpCreatePreMulSum(&s.op, where, c.type, residence, ranks_[i].comm),
                    "ncclRedOpCreatePreMulSum"))
          return false;
        s.createdOp = true;
      }
    }
    bool ok = ncclOk(ranks_[0].rank, ncclGroupStart(), "ncclGroupStart");
    for (size_t i = 0; ok && i < ranks_.size(); ++i) ok = call(c, ranks_[i], (*st)[i]);
    const ncclResult_t end = ncclGroupEnd();
    ok = ncclOk(ranks_[0].rank, end, "ncclGroupEnd") && ok;
    for (size_t i = 0; i < ranks_.size(); ++i)
      if ((*st)[i].createdOp) ncclRedOpDestroy((*st)[i].op, ranks_[i].comm);
    return ok;
  }

  bool call(const Case& c, const LocalRank& lr, const State& s) {
    const int r = lr.rank;
    ncclComm_t comm = lr.comm;
    cudaStream_t stream = lr.stream;
    switch (c.coll) {
      case Coll::kAllReduce:
        return ncclOk(r, ncclAllReduce(s.sendPtr, s.recvPtr, c.count, c.type, s.op, comm, stream), "ncclAllReduce");
      case Coll::kReduceScatter:
        return ncclOk(r, ncclReduceScatter(s.sendPtr, s.recvPtr, c.count, c.type, s.op, comm, stream),
                      "ncclReduceScatter");
      case Coll::kReduce:
        return ncclOk(r, ncclReduce(s.sendPtr, s.recvPtr, c.count, c.type, s.op, c.root, comm, stream), "ncclReduce");
      case Coll::kAllGather:
        return ncclOk(r, ncclAllGather(s.sendPtr, s.recvPtr, c.count, c.type, comm, stream), "ncclAllGather");
      case Coll::kBroadcast:
        return ncclOk(r, ncclBroadcast(s.sendPtr, s.recvPtr, c.count, c.type, c.root, comm, stream), "ncclBroadcast");
      case Coll::kAlltoAll:
        return ncclOk(r, ncclAlltoAll(s.sendPtr, s.recvPtr, c.count, c.type, comm, stream), "ncclAlltoAll");
      case Coll::kGather:
        return ncclOk(r, ncclGather(s.sendPtr, s.recvPtr, c.count, c.type, c.root, comm, stream), "ncclGather");
      case Coll::kScatter:
        return ncclOk(r, ncclScatter(s.sendPtr, s.recvPtr, c.count, c.type, c.root, comm, stream), "ncclScatter");
      case Coll::kSendRecvRing: {
        const int next = (r + 1) % n_, prev = (r + n_ - 1) % n_;
        return ncclOk(r, ncclSend(s.sendPtr, c.count, c.type, next, comm, stream), "ncclSend") &&
               ncclOk(r, ncclRecv(s.recvPtr, c.count, c.type, prev, comm, stream), "ncclRecv");
      }
    }
    return false;
  }

  // The bytes the rank's result must hold, or false when NCCL does not write it.
  bool expectedOutput(const Case& c, int rank, std::vector<uint8_t>* want) {
    const ncclt::TypeInfo& t = ncclt::typeInfo(c.type);
    const size_t cb = c.count * t.size;
    const bool root = rank == c.root;
    if (collcase::isReduction(c.coll)) {
      if (c.coll == Coll::kReduce && !root) return false;
      const Values v(t, c.op, n_, seed_);
      const size_t g0 = c.coll == Coll::kReduceScatter ? rank * c.count : 0;
      want->assign(cb, 0);
      for (size_t j = 0; j < c.count; ++j) ncclt::store(t, want->data(), j, v.expected(g0 + j));
      return true;
    }
    const size_t all = cb * static_cast<size_t>(n_);
    switch (c.coll) {
      case Coll::kAllGather:
        want->resize(all);
        for (int s = 0; s < n_; ++s) fillBytes(s, want->data() + s * cb, cb, 0);
        return true;
      case Coll::kBroadcast: want->resize(cb); fillBytes(c.root, want->data(), cb, 0); return true;
      case Coll::kAlltoAll:
        want->resize(all);
        for (int s = 0; s < n_; ++s) fillBytes(s, want->data() + s * cb, cb, rank * cb);
        return true;
      case Coll::kGather:
        if (!root) return false;
        want->resize(all);
        for (int s = 0; s < n_; ++s) fillBytes(s, want->data() + s * cb, cb, 0);
        return true;
      case Coll::kScatter: want->resize(cb); fillBytes(c.root, want->data(), cb, rank * cb); return true;
      case Coll::kSendRecvRing: want->resize(cb); fillBytes((rank + n_ - 1) % n_, want->data(), cb, 0); return true;
      default: return false;
    }
  }

  void compare(int rank, const char* what, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
               size_t elemSize) {
    size_t bad = 0, first = 0;
    for (size_t b = 0; b < want.size() && b < got.size(); ++b)
      if (got[b] != want[b] && bad++ == 0) first = b;
    if (got.size() != want.size()) {
      report(rank, std::string(what) + ": size mismatch");
    } else if (bad) {
      char text[300];
      std::snprintf(text, sizeof text, "%s: %zu of %zu bytes wrong, first at byte %zu (element %zu): got 0x%02x want 0x%02x",
                    what, bad, want.size(), first, first / elemSize, got[first], want[first]);
      report(rank, text);
    }
  }

  void check(const Case& c, int rank, const State& s) {
    const size_t es = elem(c);
    const size_t cb = c.count * es;
    std::vector<uint8_t> sendNow, recvNow, want;
    bool guardsOk = true, recvGuardsOk = true;
    if (!s.send.read(&sendNow, &guardsOk)) return (void)cudaFailed(rank, "cudaMemcpy back");
    if (!guardsOk) report(rank, "bytes outside the buffer were overwritten");
    const bool writes = expectedOutput(c, rank, &want);
    if (c.inPlace) {
      // The result at the receive pointer; elsewhere the allocation keeps its image.
      std::vector<uint8_t> image;
      size_t recvAt = 0;
      switch (c.coll) {
        case Coll::kReduceScatter: image = s.sendInit; recvAt = rank * cb; break;
        case Coll::kAllGather:
          image = s.recvInit;
          std::copy(s.sendInit.begin(), s.sendInit.end(), image.begin() + rank * cb);
          break;
        default: image = s.sendInit; break;
      }
      if (writes) std::copy(want.begin(), want.end(), image.begin() + recvAt);
      // Reduce-scatter in place leaves the rest of the send buffer undefined in NCCL: compare the result only.
      if (c.coll == Coll::kReduceScatter) {
        std::vector<uint8_t> got(sendNow.begin() + recvAt, sendNow.begin() + recvAt + cb);
        if (writes) compare(rank, "result (in place)", got, want, es);
      } else {
        compare(rank, writes ? "buffer (in place)" : "buffer NCCL must not write (in place)", sendNow, image, es);
      }
      return;
    }
    compare(rank, "sendbuff (must be unchanged)", sendNow, s.sendInit, es);
    if (!s.recv.read(&recvNow, &recvGuardsOk)) return (void)cudaFailed(rank, "cudaMemcpy back");
    if (!recvGuardsOk) report(rank, "bytes outside the receive buffer were overwritten");
    if (writes) compare(rank, "recvbuff", recvNow, want, es);
    else compare(rank, "recvbuff NCCL must not write", recvNow, s.recvInit, es);
  }

  std::vector<LocalRank> ranks_;
  int n_;
  Fail fail_;
  std::string what_;
  uint64_t seed_ = 0;
  uint64_t calls_ = 0;
  uint64_t failures_ = 0;
};

}  // namespace devcase

#endif  // BRAID_TESTS_GPU_DEVICE_CASES_H_
