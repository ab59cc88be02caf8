#include "core/reproducible.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/group.h"
#include "engine/comm.h"
#include "engine/device/device.h"
#include "reduce/fixed_point.h"
#include "reduce/host_reduce.h"
#include "reduce/numeric.h"

namespace braid::core {
namespace reproducible {

namespace {

constexpr int kCodeBits = 21;
constexpr int64_t kCodeMask = (int64_t(1) << kCodeBits) - 1;

// The datatype's values as doubles (exact) and back (rounded once to nearest;
// 16-bit types through float).
inline double widen(float v) { return v; }
inline double widen(double v) { return v; }
inline double widen(reduce::Half v) { return reduce::toFloat(v); }
inline double widen(reduce::BFloat16 v) { return toFloat(v); }
template <class T>
T narrow(double v);
template <>
inline float narrow<float>(double v) { return static_cast<float>(v); }
template <>
inline double narrow<double>(double v) { return v; }
template <>
inline reduce::Half narrow<reduce::Half>(double v) {
  return reduce::toHalf(static_cast<float>(v));
}
template <>
inline reduce::BFloat16 narrow<reduce::BFloat16>(double v) {
  return reduce::toBFloat16(static_cast<float>(v));
}

// Calls f with a typed null pointer for each floating datatype the mode covers.
template <class F>
void withType(ncclDataType_t type, F&& f) {
  switch (type) {
    case ncclFloat32: f(static_cast<float*>(nullptr)); break;
    case ncclFloat64: f(static_cast<double*>(nullptr)); break;
    case ncclFloat16: f(static_cast<reduce::Half*>(nullptr)); break;
    case ncclBfloat16: f(static_cast<reduce::BFloat16*>(nullptr)); break;
    default: break;
  }
}

// Rounds to the nearest integer, ties to even, without a libm call: below
// 2^52 adding and removing 1.5 * 2^52 leaves the rounded value (the default
// rounding mode); above it a double is an integer already. |y| < 2^62.
inline int64_t roundToInteger(double y) {
  constexpr double kShifter = 6755399441055744.0;  // 1.5 * 2^52
  return std::fabs(y) < 4503599627370496.0 ? static_cast<int64_t>((y + kShifter) - kShifter)
                                           : static_cast<int64_t>(y);
}

int ceilLog2(int n) {
  int lg = 0;
  while ((1 << lg) < n) ++lg;
  return lg;
}

// The elements of the send buffer in the agreed blocks, where the result of
// this rank starts among them, and how many results it has.
struct Shape {
  size_t all = 0;
  size_t first = 0;
  size_t results = 0;
};

Shape shapeOf(const engine::Task& t) {
  const ncclComm* comm = t.comm;
  switch (t.coll) {
    case schedule::Collective::ReduceScatter:
      return {t.count * size_t(comm->nranks), t.count * size_t(comm->rank), t.count};
    case schedule::Collective::Reduce: return {t.count, 0, comm->rank == t.root ? t.count : 0};
    default: return {t.count, 0, t.count};
  }
}

// One of the mode's own collectives on `t`'s communicator and stream: the
// exponents' int32 maximum, the int64 sums, or the results gathered.
engine::Task innerTask(const engine::Task& t, const void* send, void* recv, size_t count, ncclRedOp_t op,
                         ncclDataType_t type, schedule::Collective coll) {
  engine::Task s = t;
  s.coll = coll;
  s.sendbuff = send;
  s.recvbuff = recv;
  s.count = count;
  s.type = type;
  s.op = reduce::makeBuiltinOp(op, type, t.comm->nranks);
  s.userOp = static_cast<int>(op);
  s.deviceScalar = nullptr;
  s.wire = reduce::WireType::None;  // exact sums, and results gathered as they are
  return s;
}

Result refuse(const engine::Task& t, const char* why) {
  return fail(ncclInvalidUsage, "rank %d: %s in reproducible mode (braidCommSetReproducible, BRAID_REPRODUCIBLE): %s",
              t.comm->rank, collectiveName(t.coll), why);
}

}  // namespace

bool applies(const engine::Task& t) {
  // fixedShifts: one of the mode's own fixed-point collectives.
  if (!t.comm->settings.reproducible || t.count == 0 || t.deviceScalar != nullptr || t.fixedShifts != nullptr)
    return false;
  if (t.coll != schedule::Collective::AllReduce && t.coll != schedule::Collective::Reduce &&
      t.coll != schedule::Collective::ReduceScatter)
    return false;
  if (t.userOp != ncclSum && t.userOp != ncclAvg) return false;
  return t.type == ncclFloat32 || t.type == ncclFloat64 || t.type == ncclFloat16 || t.type == ncclBfloat16;
}

void blockExponents(const void* values, ncclDataType_t type, size_t count, int32_t* words) {
  if (type == ncclFloat32) {
    // On the bits: the largest magnitude is the largest exponent-and-mantissa
    // word, and inf and NaN are the words from 0x7f800000 up.
    const uint32_t* v = static_cast<const uint32_t*>(values);
    for (size_t b = 0; b * kBlockElems < count; ++b) {
      uint32_t special = 0;
      const size_t at = b * kBlockElems;
      const uint32_t largest = reduce::fixed::floatBlockScan(v + at, std::min(kBlockElems, count - at), &special);
      float f;
      std::memcpy(&f, &largest, sizeof f);
      words[2 * b] = largest == 0 ? kNoExponent : std::ilogb(f);
      words[2 * b + 1] = special ? 1 : 0;
    }
    return;
  }
  withType(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* v = static_cast<const T*>(values);
    const size_t blocks = (count + kBlockElems - 1) / kBlockElems;
    for (size_t b = 0; b < blocks; ++b) {
      // The largest magnitude first (a plain loop the compiler vectorises),
      // then its exponent once.
      double largest = 0;
      bool special = false;
      const size_t end = std::min(count, (b + 1) * kBlockElems);
      for (size_t i = b * kBlockElems; i < end; ++i) {
        const double a = std::fabs(widen(v[i]));
        special |= !(a <= std::numeric_limits<double>::max());  // inf or NaN
        largest = a > largest && a <= std::numeric_limits<double>::max() ? a : largest;
      }
      words[2 * b] = largest == 0 ? kNoExponent : std::ilogb(largest);
      words[2 * b + 1] = special ? 1 : 0;
    }
  });
}

int fixedPointShift(int32_t emax, int nranks, ncclDataType_t type) {
  if (emax == kNoExponent) return 0;
  return (type == ncclFloat32 ? reduce::fixed::kFloatBits : 62) - (emax + 1 + ceilLog2(nranks));
}

void toFixed(const void* values, ncclDataType_t type, size_t count, const int32_t* words, int nranks,
             int64_t* fixed) {
  if (type == ncclFloat32) {
    for (size_t b = 0; b * kBlockElems < count; ++b) {
      const size_t at = b * kBlockElems;
      reduce::fixed::floatToFixed(static_cast<const uint32_t*>(values) + at, std::min(kBlockElems, count - at),
                                  fixedPointShift(words[2 * b], nranks, type), fixed + at);
    }
    return;
  }
  withType(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* v = static_cast<const T*>(values);
    for (size_t b = 0; b * kBlockElems < count; ++b) {
      // Scaling by a power of two is exact; the one rounding is to nearest even.
      const double scale = std::ldexp(1.0, fixedPointShift(words[2 * b], nranks, type));
      const size_t end = std::min(count, (b + 1) * kBlockElems);
      for (size_t i = b * kBlockElems; i < end; ++i) {
        const double x = widen(v[i]);
        fixed[i] = std::isfinite(x) ? roundToInteger(x * scale) : 0;
      }
    }
  });
}

void specialCodes(const void* values, ncclDataType_t type, size_t count, int64_t* codes) {
  withType(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* v = static_cast<const T*>(values);
    for (size_t i = 0; i < count; ++i) {
      const double x = widen(v[i]);
      codes[i] = std::isnan(x) ? int64_t(1) << (2 * kCodeBits)
                 : std::isinf(x) ? (x > 0 ? int64_t(1) << kCodeBits : int64_t(1))
                                 : 0;
    }
  });
}

void fromFixed(const int64_t* sums, const int64_t* codes, ncclDataType_t type, size_t count, size_t first,
               const int32_t* words, int nranks, int divisor, void* out) {
  withType(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T* o = static_cast<T*>(out);
    const double inf = std::numeric_limits<double>::infinity();
    for (size_t j = 0; j < count;) {
      const size_t b = (first + j) / kBlockElems;
      const size_t end = std::min(count, (b + 1) * kBlockElems - first);
      // avg: the division folded into the scale (the same on every rank).
      const double unscale = reduce::fixed::unscaleOf(fixedPointShift(words[2 * b], nranks, type), divisor);
      if constexpr (std::is_same<T, float>::value) {
        if (!codes) {
          reduce::fixed::fixedToFloat(sums + j, end - j, unscale, o + j);
          j = end;
          continue;
        }
      }
      for (; j < end; ++j) {
        const int64_t code = codes ? codes[j] : 0;
        if (code == 0) {
          o[j] = narrow<T>(static_cast<double>(sums[j]) * unscale);
          continue;
        }
        const int64_t nans = code >> (2 * kCodeBits), pinf = (code >> kCodeBits) & kCodeMask, ninf = code & kCodeMask;
        o[j] = narrow<T>(nans || (pinf && ninf) ? std::numeric_limits<double>::quiet_NaN() : pinf ? inf : -inf);
      }
    }
  });
}

namespace {

Result runOnHost(const engine::Task& t);
Result runInPieces(const engine::Task& t);

// Elements per piece of a large allreduce or reduce: the three conversion
// passes and the integer sum of one piece then work in the cache instead of
// streaming whole buffers through memory four times. A multiple of the block,
// so every block and its agreed exponent, hence every bit, is the same as in
// one piece.
constexpr size_t kPieceElems = 64 * kBlockElems * 16;  // 262144

// Device buffers: the contributions to host memory once the stream's earlier
// work is done, the same host algorithm, the results back; the call returns
// when they are on the device (host-synchronous, unlike other device calls).
Result runOnDeviceBuffers(const engine::Task& t) {
  const Shape shape = shapeOf(t);
  const size_t size = reduce::typeSize(t.type);
  std::vector<unsigned char> send(shape.all * size), recv(shape.results * size);
  const std::string what = std::string(collectiveName(t.coll)) + " in reproducible mode";
  BRAID_TRY(device::copyFromDeviceNow(send.data(), t.sendbuff, send.size(), t.stream, what.c_str()));
  engine::Task host = t;
  host.sendbuff = send.data();
  host.recvbuff = recv.empty() ? nullptr : recv.data();
  BRAID_TRY(runInPieces(host));
  return device::copyToDeviceNow(t.recvbuff, recv.data(), recv.size(), t.stream);
}

Result runInPieces(const engine::Task& t) {
  if (t.coll == schedule::Collective::ReduceScatter || t.count <= kPieceElems) return runOnHost(t);
  const size_t size = reduce::typeSize(t.type);
  for (size_t at = 0; at < t.count; at += kPieceElems) {
    engine::Task piece = t;
    piece.sendbuff = static_cast<const char*>(t.sendbuff) + at * size;
    piece.recvbuff = t.recvbuff ? static_cast<char*>(t.recvbuff) + at * size : nullptr;
    piece.count = std::min(kPieceElems, t.count - at);
    BRAID_TRY(runOnHost(piece));
  }
  return Result::success();
}

}  // namespace

Result run(const engine::Task& t) {
  const bool sendOnDevice = device::isDeviceMemory(t.sendbuff);
  const bool recvOnDevice = device::isDeviceMemory(t.recvbuff);
  if (!sendOnDevice && !recvOnDevice) return runInPieces(t);
  const bool recvUsed = shapeOf(t).results > 0;
  if (!sendOnDevice || (recvUsed && !recvOnDevice))
    return fail(ncclInvalidArgument, "rank %d: %s: one buffer is device memory and the other host memory",
                t.comm->rank, collectiveName(t.coll));
  return runOnDeviceBuffers(t);
}

namespace {

// An allreduce of at least this many elements a rank sums its integers with a
// reduce-scatter and gathers the results in the datatype: a quarter of the
// integer allreduce's bytes fewer (float32), and each rank converts only the
// results it owns. Smaller ones take one integer allreduce (one collective's
// latency, not two).
constexpr size_t kGatherResultsFrom = 4096;

// The integer sums of `count` elements at `fixed` (in place): by `t`'s own
// collective, or, for a large allreduce, a reduce-scatter of equal shares
// with the few elements left over (fewer than the ranks) summed by an
// allreduce; where each rank's results then are.
struct IntegerSums {
  size_t first = 0;    // this rank's results (in the elements of the send buffer)
  size_t results = 0;
  size_t share = 0;    // gathered: each rank's share of the elements, from rank * share
  size_t tail = 0;     // gathered: elements after nranks * share, every rank's results
};

IntegerSums integerSumsOf(const engine::Task& t, const Shape& shape) {
  const size_t nranks = size_t(t.comm->nranks);
  IntegerSums sums{shape.first, shape.results, 0, 0};
  if (t.coll != schedule::Collective::AllReduce || nranks < 2 || t.count / nranks < kGatherResultsFrom) return sums;
  sums.share = t.count / nranks;
  sums.tail = t.count - sums.share * nranks;
  sums.first = sums.share * size_t(t.comm->rank);
  sums.results = sums.share;
  return sums;
}

Result sumIntegers(const engine::Task& t, const IntegerSums& sums, int64_t* fixed) {
  if (sums.share == 0) {
    const size_t at = t.coll == schedule::Collective::ReduceScatter ? sums.first : 0;
    return enqueueTask(innerTask(t, fixed, fixed + at, t.count, ncclSum, ncclInt64, t.coll));
  }
  BRAID_TRY(enqueueTask(innerTask(t, fixed, fixed + sums.first, sums.share, ncclSum, ncclInt64,
                                    schedule::Collective::ReduceScatter)));
  if (sums.tail == 0) return Result::success();
  int64_t* tail = fixed + sums.share * size_t(t.comm->nranks);
  return enqueueTask(innerTask(t, tail, tail, sums.tail, ncclSum, ncclInt64, schedule::Collective::AllReduce));
}

// Float32 without NaN or inf (the common case) sums in fixed point inside
// the ring reduce-scatter's steps (WireType::Fixed64, reduce/fixed_point.h):
// each rank's contribution becomes fixed point as it is first sent or added,
// and the owner's last step writes the float32 result, so no pass converts
// the buffer and no int64 copy of it is written. The same integers, hence
// the same bits, as steps 2-4 below. Not where NCCL_ALGO leaves the
// reduce-scatter no ring.
bool sumsInTheSteps(const engine::Task& t, const IntegerSums& sums, bool special) {
  return !special && t.type == ncclFloat32 && t.comm->nranks >= 2 &&
         (sums.share > 0 || t.coll == schedule::Collective::ReduceScatter) &&
         t.comm->algoFilter.allows(schedule::Collective::ReduceScatter, schedule::Algorithm::Ring);
}

Result sumInTheSteps(const engine::Task& t, const IntegerSums& sums, const std::vector<int32_t>& words) {
  const int nranks = t.comm->nranks;
  std::vector<int32_t> shifts(words.size() / 2);
  for (size_t b = 0; b < shifts.size(); ++b) shifts[b] = fixedPointShift(words[2 * b], nranks, t.type);
  const size_t size = reduce::typeSize(t.type);
  char* out = static_cast<char*>(t.recvbuff);
  const bool gathered = sums.share > 0;
  char* mine = gathered ? out + sums.first * size : out;
  engine::Task rs = innerTask(t, t.sendbuff, mine, gathered ? sums.share : t.count, ncclSum, t.type,
                              schedule::Collective::ReduceScatter);
  if (t.userOp == ncclAvg) {
    rs.op.kind = reduce::RedKind::SumPostDiv;
    rs.op.divisor = uint64_t(nranks);
  }
  rs.fixedShifts = shifts.data();
  BRAID_TRY(enqueueTask(rs));
  if (!gathered) return Result::success();
  const int divisor = t.userOp == ncclAvg ? nranks : 1;
  const size_t tailAt = sums.share * size_t(nranks);
  if (sums.tail > 0) {
    // Fewer elements than ranks: converted one by one, summed by an int64 allreduce.
    std::vector<int64_t> tail(sums.tail);
    const uint32_t* bits = static_cast<const uint32_t*>(t.sendbuff) + tailAt;
    for (size_t i = 0; i < sums.tail; ++i)
      reduce::fixed::floatToFixed(bits + i, 1, shifts[(tailAt + i) / kBlockElems], &tail[i]);
    BRAID_TRY(enqueueTask(innerTask(t, tail.data(), tail.data(), sums.tail, ncclSum, ncclInt64,
                                    schedule::Collective::AllReduce)));
    fromFixed(tail.data(), nullptr, t.type, sums.tail, tailAt, words.data(), nranks, divisor, out + tailAt * size);
  }
  return enqueueTask(innerTask(t, mine, out, sums.share, ncclSum, t.type, schedule::Collective::AllGather));
}

Result runOnHost(const engine::Task& t) {
  if (!t.comm->settings.blocking)
    return refuse(t, "not on a non-blocking communicator (ncclConfig_t blocking=0) yet");
  const int nranks = t.comm->nranks;
  const Shape shape = shapeOf(t);
  // 1. The ranks agree on each block's largest exponent (and on which blocks hold NaN or inf).
  std::vector<int32_t> words(2 * ((shape.all + kBlockElems - 1) / kBlockElems));
  blockExponents(t.sendbuff, t.type, shape.all, words.data());
  BRAID_TRY(enqueueTask(
      innerTask(t, words.data(), words.data(), words.size(), ncclMax, ncclInt32, schedule::Collective::AllReduce)));
  bool special = false;
  for (size_t b = 1; b < words.size(); b += 2) special = special || words[b] != 0;
  const IntegerSums sums = integerSumsOf(t, shape);
  if (sumsInTheSteps(t, sums, special)) return sumInTheSteps(t, sums, words);
  // 2. Fixed point, summed exactly on int64, in place (a reduce-scatter's
  // result lands at this rank's block, as NCCL's in-place reduce-scatter
  // does): one int64 per element of scratch, two with NaN or inf.
  std::vector<int64_t>& scratch = t.comm->reproducibleScratch;
  scratch.resize(std::max(scratch.size(), (special ? 2 : 1) * shape.all));
  int64_t* fixed = scratch.data();
  int64_t* codes = fixed + shape.all;
  toFixed(t.sendbuff, t.type, shape.all, words.data(), nranks, fixed);
  BRAID_TRY(sumIntegers(t, sums, fixed));
  if (special) {
    specialCodes(t.sendbuff, t.type, shape.all, codes);
    BRAID_TRY(sumIntegers(t, sums, codes));
  }
  // 3. Each result back in the datatype, by its owner; a gathered
  // allreduce's shares then go to every rank as they are (the same bits).
  const int divisor = t.userOp == ncclAvg ? nranks : 1;
  const size_t size = reduce::typeSize(t.type);
  char* out = static_cast<char*>(t.recvbuff);
  // A reduce-scatter's results start its output; a gathered share is in place.
  char* mine = sums.share > 0 ? out + sums.first * size : out;
  fromFixed(fixed + sums.first, special ? codes + sums.first : nullptr, t.type, sums.results, sums.first,
            words.data(), nranks, divisor, mine);
  if (sums.share == 0) return Result::success();
  const size_t tailAt = sums.share * size_t(nranks);
  if (sums.tail > 0)
    fromFixed(fixed + tailAt, special ? codes + tailAt : nullptr, t.type, sums.tail, tailAt, words.data(), nranks,
              divisor, out + tailAt * size);
  return enqueueTask(innerTask(t, mine, out, sums.share, ncclSum, t.type, schedule::Collective::AllGather));
}

}  // namespace

}  // namespace reproducible
}  // namespace braid::core
