// Wire types: the format of a float32 reduction's messages when a
// communicator sends fewer bytes than it accumulates (braidCommSetWireType,
// BRAID_WIRE_TYPE). Every hop widens what it receives, accumulates in float
// and narrows what it sends (kernels/executor/wire_step.h); this header is
// what a message of n values looks like and how a group of them is narrowed
// and widened. BRAID_HD, like numeric.h, for the host runner and the kernels.
//
// bfloat16 has float's exponent range and travels unscaled. float16 and the
// two fp8 formats would lose gradients to underflow (fp8 e4m3's smallest
// value is 2^-9) and overflow past their largest, so every group of 32
// consecutive values of a message is scaled by a power of two 2^s chosen from
// the group's largest finite magnitude M (the smallest s with M <= max * 2^s):
// the group's largest value lands in the format's top binade and the others
// keep the format's relative precision down to its subnormals. s travels in
// the message, so no extra round trip agrees on it.
//
// Message of n values, G = ceil(n / 32) groups:
//   scaled:   G headers of 2 bytes (int8 s; flags), padded to 16 bytes, then
//             n codes of 1 (fp8) or 2 (float16) bytes
//   bfloat16: n codes of 2 bytes
//
// Non-finite values: float16 and fp8 e5m2 carry infinities and NaN as such
// (the usual converters saturate fp8; these do not). fp8 e4m3 has no
// infinity: a group that holds one is coded in e5m2 instead (header flag
// kWireGroupE5M2), so an infinity stays infinite at the cost of one bit of
// precision in that group only. bfloat16: a finite value past bfloat16's
// largest becomes that largest, not infinity.
//
// Rounding: to nearest even. One narrowing of a value v in a group whose
// largest finite magnitude is M errs by at most u*|v| + q*M, with u = 2^-8
// (bfloat16), 2^-11 (float16), 2^-4 (e4m3), 2^-3 (e5m2) and q the format's
// smallest subnormal over its largest finite (0 for bfloat16; values below
// float's normal range are flushed by the scaling's float arithmetic).
#pragma once

#include <cstdint>

#include "reduce/numeric.h"

namespace braid::reduce {

// Fixed64: not a user's choice but reproducible mode's exact sums
// (core/reproducible.h): messages of int64 fixed point, each value scaled by
// its block's agreed power of two (OpBuffers::fixedShifts), added as integers
// at every hop and turned back into float32 once by the owner
// (reduce/fixed_point.h).
enum class WireType : uint8_t { None = 0, BFloat16, Float16, Fp8E4M3, Fp8E5M2, Fixed64 };

constexpr uint32_t kWireGroup = 32;          // values per scaled group
constexpr uint8_t kWireGroupE5M2 = 1;        // header flag: an e4m3 group coded in e5m2
constexpr uint8_t kWireGroupSlow = 2;        // header flag: infinities, NaN or a scale past 2^100
constexpr uint64_t kWireHeaderAlign = 16;    // codes start 16-byte aligned

BRAID_HD BRAID_INLINE bool wireScaled(WireType w) {
  return w != WireType::BFloat16 && w != WireType::None && w != WireType::Fixed64;
}
BRAID_HD BRAID_INLINE uint32_t wireCodeBytes(WireType w) {
  if (w == WireType::Fixed64) return 8;
  return w == WireType::Fp8E4M3 || w == WireType::Fp8E5M2 ? 1 : w == WireType::None ? 4 : 2;
}
BRAID_HD BRAID_INLINE uint64_t wireGroups(uint64_t n) { return (n + kWireGroup - 1) / kWireGroup; }
BRAID_HD BRAID_INLINE uint64_t wireHeaderBytes(WireType w, uint64_t n) {
  if (!wireScaled(w)) return 0;
  return (2 * wireGroups(n) + kWireHeaderAlign - 1) / kWireHeaderAlign * kWireHeaderAlign;
}
// Bytes of a message of n values (None: n floats).
BRAID_HD BRAID_INLINE uint64_t wireBytes(WireType w, uint64_t n) {
  return wireHeaderBytes(w, n) + n * wireCodeBytes(w);
}
// The most values a message of at most `bytes` holds (the planner's chunks).
inline uint64_t wireCountFitting(WireType w, uint64_t bytes) {
  const uint64_t code = wireCodeBytes(w);
  if (!wireScaled(w)) return bytes / code;
  // n * code + 2 * n / 32 + padding <= bytes: start above, step down.
  uint64_t n = bytes * kWireGroup / (kWireGroup * code + 2) + 1;
  while (n > 0 && wireBytes(w, n) > bytes) --n;
  return n;
}

// "bf16", "fp16", "fp8e4m3", "fp8e5m2" (BRAID_WIRE_TYPE's words), "none".
inline const char* wireTypeName(WireType w) {
  switch (w) {
    case WireType::BFloat16: return "bf16";
    case WireType::Float16: return "fp16";
    case WireType::Fp8E4M3: return "fp8e4m3";
    case WireType::Fp8E5M2: return "fp8e5m2";
    case WireType::Fixed64: return "fixed64";
    case WireType::None: break;
  }
  return "none";
}

namespace wire {

using numeric::bitsFloat;
using numeric::floatBits;
using numeric::pow2Bits;

// F's largest finite value as float bits: its exponent and mantissa rebiased.
template <class F>
BRAID_HD constexpr uint32_t maxFiniteBits() {
  return ((F::kMaxFinite >> F::kMant) + uint32_t(127 - F::kBias)) << 23 |
         ((F::kMaxFinite & ((1u << F::kMant) - 1)) << (23 - F::kMant));
}

// The smallest s with m <= maxFinite * 2^s, for a finite m > 0, clamped to
// int8. Exact integer work on the bits (no log2).
template <class F>
BRAID_HD BRAID_INLINE int shiftFor(float m) {
  constexpr uint32_t maxBits = maxFiniteBits<F>();
  uint32_t b = floatBits(m);
  int bias = 0;
  if ((b >> 23) == 0) {  // subnormal float: normalise by 2^64 first
    b = floatBits(m * bitsFloat(pow2Bits(64)));
    bias = 64;
  }
  const int e = int(b >> 23) - int(maxBits >> 23) - bias;
  const int s = e + ((b & 0x7fffffu) > (maxBits & 0x7fffffu) ? 1 : 0);
  return s < -128 ? -128 : s > 127 ? 127 : s;
}

template <class F>
BRAID_HD BRAID_INLINE uint32_t encodeScaled(float x) {
  // fromFloat saturates fp8 (infinity included); on the wire an infinity stays one.
  const uint32_t ax = floatBits(x) & 0x7fffffffu;
  const uint32_t code = numeric::fromFloat<F>(x);
  if (!F::kSatFinite || F::kNoInf) return code;
  return numeric::selectBits(ax == 0x7f800000u, (floatBits(x) >> 31) << (F::kBits - 1) | F::kInf, code);
}

template <class F, class Code>
BRAID_HD BRAID_INLINE void encodeGroupAs(const float* v, uint32_t n, Code* codes, int s) {
  const int e = -s;
  const float f1 = bitsFloat(pow2Bits(e / 2)), f2 = bitsFloat(pow2Bits(e - e / 2));
  for (uint32_t j = 0; j < n; ++j) codes[j] = Code(encodeScaled<F>(v[j] * f1 * f2));
}

// A finite code whose scaled value passes float's largest (a group within a
// rounding of FLT_MAX) decodes to that largest: finite stays finite.
template <class F, class Code>
BRAID_HD BRAID_INLINE void decodeGroupAs(const Code* codes, uint32_t n, float* v, int s) {
  const float f1 = bitsFloat(pow2Bits(s / 2)), f2 = bitsFloat(pow2Bits(s - s / 2));
  for (uint32_t j = 0; j < n; ++j) {
    const float x = numeric::toFloat<F>(codes[j]);
    const uint32_t r = floatBits(x * f1 * f2);
    const bool over = (floatBits(x) & 0x7fffffffu) < 0x7f800000u && (r & 0x7fffffffu) == 0x7f800000u;
    v[j] = bitsFloat(numeric::selectBits(over, (r & 0x80000000u) | 0x7f7fffffu, r));
  }
}

// The fast path, for groups without infinities or NaN whose scale keeps
// every value far from float's largest (the common case): the FPU rounds.
// Adding c = 2^(E + 23 - M), E the value's exponent (at least F's smallest
// normal one), leaves the sum with an ulp of 2^(E - M), F's ulp there, so
// (|x| + c) - c is |x| rounded to nearest even in F: the same code as
// numeric::fromFloat, in a third of its instructions.
template <class F>
BRAID_HD BRAID_INLINE uint32_t encodeFinite(float x) {
  constexpr uint32_t minNormalExp = uint32_t(127 + 1 - F::kBias);
  const uint32_t b = floatBits(x);
  const uint32_t a = b & 0x7fffffffu;
  const uint32_t e = (a >> 23) < minNormalExp ? minNormalExp : (a >> 23);
  const float c = bitsFloat((e + uint32_t(23 - F::kMant)) << 23);
  const uint32_t r = floatBits((bitsFloat(a) + c) - c);
  const uint32_t normal = (r - (uint32_t(127 - F::kBias) << 23)) >> (23 - F::kMant);
  const uint32_t sub = uint32_t(int32_t(bitsFloat(r) * bitsFloat(pow2Bits(F::kBias - 1 + F::kMant))));
  // A mask, not a ternary: GCC branches around the float conversion of a ternary.
  return numeric::selectBits(r < (minNormalExp << 23), sub, normal) | ((b >> 31) << (F::kBits - 1));
}

// A finite code back to float (no infinity or NaN among the group's codes).
template <class F>
BRAID_HD BRAID_INLINE float decodeFinite(uint32_t h) {
  const uint32_t mag = h & F::kAbsMask;
  const uint32_t sign = (h & F::kSign) << (31 - (F::kBits - 1));
  const uint32_t normal = (mag << (23 - F::kMant)) + (uint32_t(127 - F::kBias) << 23);
  const uint32_t sub = floatBits(float(int32_t(mag)) * bitsFloat(pow2Bits(1 - F::kBias - F::kMant)));
  return bitsFloat(numeric::selectBits(mag < (1u << F::kMant), sub, normal) | sign);
}

// The bits of the largest finite magnitude of v[0..n) (0 when none); in
// *special, kHasInf and kHasNaN for what else the group holds. Separate loops
// of masks and unsigned maxima: that is what GCC vectorises.
constexpr uint32_t kHasInf = 1, kHasNaN = 2;
BRAID_HD BRAID_INLINE uint32_t scanGroup(const float* v, uint32_t n, uint32_t* special) {
  uint32_t m = 0, inf = 0, nan = 0;
  for (uint32_t j = 0; j < n; ++j) {
    const uint32_t a = floatBits(v[j]) & 0x7fffffffu;
    const uint32_t finite = a & (0u - uint32_t(a < 0x7f800000u));
    m = finite > m ? finite : m;
  }
  for (uint32_t j = 0; j < n; ++j) inf |= uint32_t((floatBits(v[j]) & 0x7fffffffu) == 0x7f800000u);
  for (uint32_t j = 0; j < n; ++j) nan |= uint32_t((floatBits(v[j]) & 0x7fffffffu) > 0x7f800000u);
  *special = (inf != 0 ? kHasInf : 0) | (nan != 0 ? kHasNaN : 0);
  return m;
}

// Scales up to 2^100 stay on the fast path: 448 * 2^100 is far below FLT_MAX,
// so no decoded value can pass it.
constexpr int kFastShiftMax = 100;

// The scale s of a group whose largest finite magnitude has the bits m (0:
// none).
template <class F>
BRAID_HD BRAID_INLINE int groupShift(uint32_t m) {
  return m != 0 ? shiftFor<F>(bitsFloat(m)) : 0;
}

// A fast group's 2^-s (narrowing) and 2^s (widening), s in [-128, 100], as
// the two factors every codec multiplies by in turn: f2 is 1 but past float's
// normal range, where one power of two would not be a normal float.
struct Pow2Factors {
  float f1, f2;
};
BRAID_HD BRAID_INLINE Pow2Factors narrowingFactors(int s) {
  return {s >= -126 ? bitsFloat(pow2Bits(-s)) : bitsFloat(pow2Bits(64)),
          s >= -126 ? 1.0f : bitsFloat(pow2Bits(-s - 64))};
}
BRAID_HD BRAID_INLINE Pow2Factors wideningFactors(int s) {
  return {s >= -126 ? bitsFloat(pow2Bits(s)) : bitsFloat(pow2Bits(-64)),
          s >= -126 ? 1.0f : bitsFloat(pow2Bits(s + 64))};
}

// Narrows a group as format F, given its scan (scanGroup): the fast path
// when it holds no infinity or NaN and its scale is at most 2^100 (header
// flags 0), else the converters, flagged kWireGroupSlow | `flags`.
template <class F, class Code>
BRAID_HD BRAID_INLINE void encodeScannedGroup(const float* v, uint32_t n, Code* codes, uint8_t* header, uint32_t m,
                                              uint32_t special, uint8_t flags) {
  const int s = groupShift<F>(m);
  header[0] = uint8_t(int8_t(s));
  if (special != 0 || s > kFastShiftMax) {
    header[1] = uint8_t(kWireGroupSlow | flags);
    encodeGroupAs<F>(v, n, codes, s);
    return;
  }
  header[1] = 0;
  const Pow2Factors k = narrowingFactors(s);
  for (uint32_t j = 0; j < n; ++j) codes[j] = Code(encodeFinite<F>(v[j] * k.f1 * k.f2));
}

template <class F, class Code>
BRAID_HD BRAID_INLINE void decodeFastGroup(const Code* codes, uint32_t n, float* v, int s) {
  const Pow2Factors k = wideningFactors(s);
  for (uint32_t j = 0; j < n; ++j) v[j] = decodeFinite<F>(codes[j]) * k.f1 * k.f2;
}

}  // namespace wire

// The codecs, one per wire type: encode() narrows a group, v[0..n) with
// n <= 32, into its codes and its 2-byte header; decode() widens it back
// (in a block, calls: BRAID_INLINE_ON_HOST).
// Unscaled (kScaled false): each value on its own, encodeOne/decodeOne.
struct WireBf16 {
  static constexpr WireType kType = WireType::BFloat16;
  static constexpr bool kScaled = false;
  using Code = uint16_t;
  BRAID_HD BRAID_INLINE static uint16_t encodeOne(float f) {
    // A finite value that would round past the largest bfloat16 is clamped
    // to it first (0x7f7f7fff rounds to 0x7f7f); infinities and NaN pass.
    const uint32_t x = numeric::floatBits(f);
    const uint32_t a = x & 0x7fffffffu;
    const uint32_t clamped = a < 0x7f800000u && a > 0x7f7f7fffu ? 0x7f7f7fffu : a;
    return numeric::bf16FromFloat(numeric::bitsFloat((x & 0x80000000u) | clamped));
  }
  BRAID_HD BRAID_INLINE static float decodeOne(uint16_t c) { return numeric::bf16ToFloat(c); }
  BRAID_HD BRAID_INLINE_ON_HOST static void encode(const float* v, uint32_t n, uint8_t* codes, uint8_t*) {
    uint16_t* c = reinterpret_cast<uint16_t*>(codes);
    for (uint32_t j = 0; j < n; ++j) c[j] = encodeOne(v[j]);
  }
  BRAID_HD BRAID_INLINE_ON_HOST static void decode(const uint8_t* codes, const uint8_t*, uint32_t n, float* v) {
    const uint16_t* c = reinterpret_cast<const uint16_t*>(codes);
    for (uint32_t j = 0; j < n; ++j) v[j] = decodeOne(c[j]);
  }
};

template <class F, class Code, WireType W>
struct WireScaled {
  static constexpr WireType kType = W;
  static constexpr bool kScaled = true;
  BRAID_HD BRAID_INLINE_ON_HOST static void encode(const float* v, uint32_t n, uint8_t* codes, uint8_t* header) {
    uint32_t special = 0;
    const uint32_t m = wire::scanGroup(v, n, &special);
    wire::encodeScannedGroup<F>(v, n, reinterpret_cast<Code*>(codes), header, m, special, 0);
  }
  BRAID_HD BRAID_INLINE_ON_HOST static void decode(const uint8_t* codes, const uint8_t* header, uint32_t n, float* v) {
    const int s = int(int8_t(header[0]));
    if (header[1] == 0) return wire::decodeFastGroup<F>(reinterpret_cast<const Code*>(codes), n, v, s);
    wire::decodeGroupAs<F>(reinterpret_cast<const Code*>(codes), n, v, s);
  }
};
using WireF16 = WireScaled<numeric::HalfFormat, uint16_t, WireType::Float16>;
using WireE5M2 = WireScaled<numeric::E5M2Format, uint8_t, WireType::Fp8E5M2>;

// e4m3, except a group that holds an infinity, which goes as e5m2.
struct WireE4M3 {
  static constexpr WireType kType = WireType::Fp8E4M3;
  static constexpr bool kScaled = true;
  BRAID_HD BRAID_INLINE_ON_HOST static void encode(const float* v, uint32_t n, uint8_t* codes, uint8_t* header) {
    uint32_t special = 0;
    const uint32_t m = wire::scanGroup(v, n, &special);
    if (special & wire::kHasInf) {
      wire::encodeScannedGroup<numeric::E5M2Format>(v, n, codes, header, m, special, kWireGroupE5M2);
    } else {
      wire::encodeScannedGroup<numeric::E4M3Format>(v, n, codes, header, m, special, 0);
    }
  }
  BRAID_HD BRAID_INLINE_ON_HOST static void decode(const uint8_t* codes, const uint8_t* header, uint32_t n, float* v) {
    const int s = int(int8_t(header[0]));
    if (header[1] == 0) return wire::decodeFastGroup<numeric::E4M3Format>(codes, n, v, s);
    if (header[1] & kWireGroupE5M2) {
      wire::decodeGroupAs<numeric::E5M2Format>(codes, n, v, s);
    } else {
      wire::decodeGroupAs<numeric::E4M3Format>(codes, n, v, s);
    }
  }
};

// apply(Codec()) for the wire type's codec (None: bfloat16's, never used);
// F16, E4M3 and E5M2 name other codecs of the scaled formats with these bits
// (a plan kernel's: wire_codecs_packed.h).
template <class F16 = WireF16, class E4M3 = WireE4M3, class E5M2 = WireE5M2, class Apply>
BRAID_HD BRAID_INLINE void withWireCodec(WireType w, Apply apply) {
  switch (w) {
    case WireType::Float16: return apply(F16());
    case WireType::Fp8E4M3: return apply(E4M3());
    case WireType::Fp8E5M2: return apply(E5M2());
    default: return apply(WireBf16());
  }
}

// One group through the wire type's codec (tests, and a step's round trip).
BRAID_HD BRAID_INLINE void wireEncodeGroup(WireType w, const float* v, uint32_t n, uint8_t* codes, uint8_t* header) {
  withWireCodec(w, [&](auto codec) { codec.encode(v, n, codes, header); });
}
BRAID_HD BRAID_INLINE void wireDecodeGroup(WireType w, const uint8_t* codes, const uint8_t* header, uint32_t n,
                                           float* v) {
  withWireCodec(w, [&](auto codec) { codec.decode(codes, header, n, v); });
}

// Where group g of a message of `count` values keeps its codes and header.
BRAID_HD BRAID_INLINE uint8_t* wireCodesOf(WireType w, uint8_t* msg, uint64_t count, uint64_t g) {
  return msg + wireHeaderBytes(w, count) + g * kWireGroup * wireCodeBytes(w);
}
BRAID_HD BRAID_INLINE uint8_t* wireHeaderOf(uint8_t* msg, uint64_t g) { return msg + 2 * g; }

}  // namespace braid::reduce
