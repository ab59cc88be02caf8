// Narrow floating-point types (float16, bfloat16, fp8 e4m3, fp8 e5m2) as plain
// bit containers, with conversions to and from float.
//
// This header is shared by the host reductions and, later, the CUDA kernels, so
// everything here is BRAID_HD, uses no standard library calls, and reinterprets
// bits through a union (std::memcpy and std::bit_cast are not usable on device
// before C++20). The conversions are branch-light so g++ can vectorise loops that
// call them.
//
// Rounding from float is to nearest, ties to even, everywhere:
//  - float16, bfloat16: IEEE behaviour; values past the largest finite number
//    become infinity, NaN stays NaN (quiet, sign and high payload bits kept).
//  - fp8 e4m3 (OCP "e4m3fn": no infinity, largest finite 448, NaN is 0x7f/0xff)
//    and fp8 e5m2 (IEEE-like, largest finite 57344, has infinity): saturating,
//    as NVIDIA's cuda_fp8.hpp with __NV_SATFINITE, which NCCL uses for its fp8
//    reductions. Read from CUDA 13's header: a value that rounds past the
//    largest finite number becomes +-max; an INFINITE input also becomes +-max
//    (the header's overflow test `|x| > max + ulp/2` is true for infinity, and
//    the PTX cvt.rn.satfinite instruction behaves the same way), so fp8 results
//    of a reduction are never infinite; NaN becomes the canonical NaN 0x7f (the
//    header canonicalises NaN before converting, dropping the sign).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define BRAID_HD __host__ __device__
#define BRAID_INLINE __forceinline__
#define BRAID_OUT_OF_LINE
#else
#define BRAID_HD
// Forced: the reduction loops only vectorise when the conversions are inlined,
// and g++ stops inlining them once they are used in many instantiations.
#define BRAID_INLINE inline __attribute__((always_inline))
// A rare path kept out of the hot loop it sits in (host code layout: the
// host runner's per-step code stays as small as it was without it).
#define BRAID_OUT_OF_LINE __attribute__((noinline))
#endif
// Inlined on the host (as BRAID_INLINE), a call in a block: for large code
// that many instantiations use (the wire codecs and steps), which inlined
// into each of them made ptxas take minutes more.
#if defined(__CUDA_ARCH__)
#define BRAID_INLINE_ON_HOST __noinline__
#else
#define BRAID_INLINE_ON_HOST BRAID_INLINE
#endif

namespace braid::reduce {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
struct Fp8E4M3 {
  uint8_t bits;
};
struct Fp8E5M2 {
  uint8_t bits;
};

namespace numeric {

BRAID_HD BRAID_INLINE uint32_t floatBits(float f) {
  union {
    float f;
    uint32_t u;
  } v;
  v.f = f;
  return v.u;
}

BRAID_HD BRAID_INLINE float bitsFloat(uint32_t u) {
  union {
    float f;
    uint32_t u;
  } v;
  v.u = u;
  return v.f;
}

// c ? x : y, written with masks: the conversions compute both sides with float
// arithmetic, and g++ will not turn a ternary whose arm holds a float operation
// into a vector select (the operation might raise an FP exception), which would
// stop the reduction loops from vectorising.
BRAID_HD BRAID_INLINE uint32_t selectBits(bool c, uint32_t x, uint32_t y) {
  const uint32_t m = 0u - uint32_t(c);
  return (x & m) | (y & ~m);
}

// 2^e as a float for -126 <= e <= 127, built from bits (no ldexp on device).
BRAID_HD constexpr uint32_t pow2Bits(int e) { return uint32_t(e + 127) << 23; }

// A narrow IEEE-style format: 1 sign bit, E exponent bits, M mantissa bits.
// SatFinite: out-of-range values and infinities saturate to the largest finite
// value (fp8); otherwise they become infinity (float16). NoInf: the all-ones
// exponent holds finite values and only all-ones exponent+mantissa is NaN (e4m3).
template <int E, int M, bool SatFinite, bool NoInf>
struct Format {
  static constexpr int kMant = M;
  static constexpr bool kSatFinite = SatFinite;
  static constexpr bool kNoInf = NoInf;
  static constexpr int kBias = (1 << (E - 1)) - 1;
  static constexpr int kBits = 1 + E + M;
  static constexpr uint32_t kSign = 1u << (E + M);
  static constexpr uint32_t kAbsMask = kSign - 1;
  static constexpr uint32_t kExpMask = ((1u << E) - 1) << M;
  // Largest finite magnitude, as bits.
  static constexpr uint32_t kMaxFinite = NoInf ? kAbsMask - 1 : kExpMask - 1;
  static constexpr uint32_t kInf = kExpMask;                       // unused when NoInf
  static constexpr uint32_t kCanonicalNaN = NoInf || SatFinite ? kAbsMask : kExpMask | (1u << (M - 1));
  // Smallest normal magnitude, as float bits.
  static constexpr uint32_t kMinNormalFloat = pow2Bits(1 - kBias);
  // Adding this float to a magnitude below the smallest normal rounds it (RNE)
  // to a multiple of the smallest subnormal, 2^(1-bias-M): its float ulp is
  // exactly that step. Both operands are normal floats for the formats we use.
  static constexpr uint32_t kSubnormalMagic = pow2Bits(1 - kBias - M + 23);
};

using HalfFormat = Format<5, 10, false, false>;
using E4M3Format = Format<4, 3, true, true>;
using E5M2Format = Format<5, 2, true, false>;

// float -> narrow, round to nearest even. Returns the bits.
template <class F>
BRAID_HD BRAID_INLINE uint32_t fromFloat(float f) {
  const uint32_t x = floatBits(f);
  const uint32_t sign = (x >> 31) << (F::kBits - 1);
  const uint32_t ax = x & 0x7fffffffu;

  // Normal range: rebias the exponent, then round the dropped mantissa bits to
  // nearest even by adding just under half an ulp plus the kept lowest bit; a
  // carry moves into the exponent, which is exactly what rounding up does.
  constexpr int kShift = 23 - F::kMant;
  const uint32_t lsb = (ax >> kShift) & 1u;
  const uint32_t rebias = uint32_t(127 - F::kBias) << 23;
  const uint32_t normal = (ax - rebias + ((1u << (kShift - 1)) - 1) + lsb) >> kShift;

  // Subnormal range: let the FPU round by adding a magic power of two.
  const uint32_t subnormal =
      floatBits(bitsFloat(ax) + bitsFloat(F::kSubnormalMagic)) - F::kSubnormalMagic;

  uint32_t r = selectBits(ax < F::kMinNormalFloat, subnormal, normal);
  // Overflow (an infinite input lands past the maximum too).
  const uint32_t over = F::kSatFinite ? F::kMaxFinite : F::kInf;
  r = r > F::kMaxFinite ? over : r;
  r |= sign;
  // NaN. fp8 (SATFINITE) uses one canonical NaN without sign, as NVIDIA's
  // converter does; float16 keeps sign and the top payload bits, quietened.
  const uint32_t nan = F::kSatFinite
                           ? F::kCanonicalNaN
                           : sign | F::kExpMask | (1u << (F::kMant - 1)) | ((ax & 0x7fffffu) >> kShift);
  return selectBits(ax > 0x7f800000u, nan, r);
}

// narrow -> float, exact.
template <class F>
BRAID_HD BRAID_INLINE float toFloat(uint32_t h) {
  constexpr int M = F::kMant;
  const uint32_t sign = (h & F::kSign) << (31 - (F::kBits - 1));
  const uint32_t exp = (h & F::kExpMask) >> M;
  const uint32_t mant = h & ((1u << M) - 1);
  // Normal: widen exponent and mantissa.
  uint32_t r = ((exp + uint32_t(127 - F::kBias)) << 23) | (mant << (23 - M));
  // Subnormal: mant * 2^(1-bias-M); an int->float conversion and a multiply by a
  // power of two on normal floats (no dependence on denormal handling).
  const uint32_t sub = floatBits(float(int32_t(mant)) * bitsFloat(pow2Bits(1 - F::kBias - M)));
  r = selectBits(exp == 0, sub, r);
  // Specials: e4m3 has only NaN (all ones); the others have inf and NaN at the
  // all-ones exponent.
  const bool special = F::kNoInf ? (h & F::kAbsMask) == F::kAbsMask : exp == (F::kExpMask >> M);
  const uint32_t inf = 0x7f800000u | (mant << (23 - M));
  const uint32_t nanOrInf = F::kNoInf ? 0x7fc00000u : (mant != 0 ? inf | 0x400000u : inf);
  r = selectBits(special, nanOrInf, r);
  return bitsFloat(sign | r);
}

// float -> bfloat16: bfloat16 is the top half of a float, so rounding is one
// integer add on the dropped 16 bits (subnormals and overflow fall out of it).
BRAID_HD BRAID_INLINE uint16_t bf16FromFloat(float f) {
  const uint32_t x = floatBits(f);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | 0x40u;
  return uint16_t((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

BRAID_HD BRAID_INLINE float bf16ToFloat(uint16_t b) { return bitsFloat(uint32_t(b) << 16); }

}  // namespace numeric

BRAID_HD BRAID_INLINE float toFloat(Half h) { return numeric::toFloat<numeric::HalfFormat>(h.bits); }
BRAID_HD BRAID_INLINE float toFloat(BFloat16 b) { return numeric::bf16ToFloat(b.bits); }
BRAID_HD BRAID_INLINE float toFloat(Fp8E4M3 v) { return numeric::toFloat<numeric::E4M3Format>(v.bits); }
BRAID_HD BRAID_INLINE float toFloat(Fp8E5M2 v) { return numeric::toFloat<numeric::E5M2Format>(v.bits); }

BRAID_HD BRAID_INLINE Half toHalf(float f) {
  return Half{uint16_t(numeric::fromFloat<numeric::HalfFormat>(f))};
}
BRAID_HD BRAID_INLINE BFloat16 toBFloat16(float f) { return BFloat16{numeric::bf16FromFloat(f)}; }
BRAID_HD BRAID_INLINE Fp8E4M3 toFp8E4M3(float f) {
  return Fp8E4M3{uint8_t(numeric::fromFloat<numeric::E4M3Format>(f))};
}
BRAID_HD BRAID_INLINE Fp8E5M2 toFp8E5M2(float f) {
  return Fp8E5M2{uint8_t(numeric::fromFloat<numeric::E5M2Format>(f))};
}

// Generic conversion used by templated reduction code: fromFloat<T>(f).
template <class T>
BRAID_HD BRAID_INLINE T fromFloat(float f);
template <>
BRAID_HD BRAID_INLINE Half fromFloat<Half>(float f) { return toHalf(f); }
template <>
BRAID_HD BRAID_INLINE BFloat16 fromFloat<BFloat16>(float f) { return toBFloat16(f); }
template <>
BRAID_HD BRAID_INLINE Fp8E4M3 fromFloat<Fp8E4M3>(float f) { return toFp8E4M3(f); }
template <>
BRAID_HD BRAID_INLINE Fp8E5M2 fromFloat<Fp8E5M2>(float f) { return toFp8E5M2(f); }

}  // namespace braid::reduce
