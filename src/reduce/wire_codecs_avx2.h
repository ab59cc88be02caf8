// The scaled wire codecs (wire_format.h) for the host's AVX2 units: the same
// interface and the same bits as WireF16, WireE4M3 and WireE5M2, a full group
// of 32 values in a handful of 8-lane instructions where GCC's vectorisation
// of the portable code spends several times as many (horizontal maxima, the
// select chains of encodeFinite, conversions between lane widths). Each step
// is the portable one written eight lanes at a time, with the same float
// operations in the same order. Only full groups on the fast path (header
// flags 0) run here; a short last group, a group holding an infinity or NaN,
// one whose scale passes 2^100, and a float16 fast group with infinity or NaN
// codes (a damaged message) go through the portable codec unchanged. The
// fp8 codecs also run a hop's whole group in registers (sumGroup, and
// sumGroupPair for two at a time: widen, sum, narrow, and keep the
// narrowing's widened value from the rounding itself), which is where a
// ring's owner spends most of its coding time.
//
// Host only, x86-64 GCC or Clang (BRAID_WIRE_AVX2): the functions are built
// for AVX2 and F16C, so call them only where wireCodecsAvx2Usable() is true.
// host_wire.cc inlines them into wire_loops.h's loops with `flatten` (a
// function built for AVX2 may inline them; the portable loops between them
// and it may not, so always_inline would fail to build).
#pragma once

#include <cstdint>

#include "reduce/reduce_ops.h"
#include "reduce/wire_format.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define BRAID_WIRE_AVX2 1
#include <immintrin.h>
#else
#define BRAID_WIRE_AVX2 0
#endif

namespace braid::reduce {

// Whether this CPU runs the codecs below (AVX2 and F16C; false off x86-64).
bool wireCodecsAvx2Usable();

#if BRAID_WIRE_AVX2

#define BRAID_WIRE_AVX2_FN inline __attribute__((target("avx2,f16c")))
#define BRAID_WIRE_AVX2_STEP inline __attribute__((target("avx2,f16c"), always_inline))
// The encoders stay out of line: they are larger, and the calls cost little
// next to them.
#define BRAID_WIRE_AVX2_ENCODE inline __attribute__((target("avx2,f16c"), noinline))
#define BRAID_WIRE_AVX2_PORTABLE __attribute__((noinline))

namespace wire_avx2 {

using numeric::bitsFloat;
using numeric::pow2Bits;

// The largest of 32 magnitudes (float bits with the sign cleared), in every
// lane. Every magnitude is a non-negative int32, so signed maxima order them
// as floats; infinities and NaN sort above every finite value.
BRAID_WIRE_AVX2_STEP __m256i largestMagnitude(const __m256i a[4]) {
  __m256i m = _mm256_max_epi32(_mm256_max_epi32(a[0], a[1]), _mm256_max_epi32(a[2], a[3]));
  m = _mm256_max_epi32(m, _mm256_permute2x128_si256(m, m, 1));
  m = _mm256_max_epi32(m, _mm256_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm256_max_epi32(m, _mm256_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1)));
}

// x[] times f1, then times f2: f2 is 1 for every scale but the extremes
// (past float's normal range), and then one multiply gives the same bits.
BRAID_WIRE_AVX2_STEP void timesPow2(__m256 x[4], float f1, float f2) {
  const __m256 k1 = _mm256_set1_ps(f1);
  if (f2 == 1.0f) {
    for (int k = 0; k < 4; ++k) x[k] = _mm256_mul_ps(x[k], k1);
  } else {
    const __m256 k2 = _mm256_set1_ps(f2);
    for (int k = 0; k < 4; ++k) x[k] = _mm256_mul_ps(_mm256_mul_ps(x[k], k1), k2);
  }
}

// wire::shiftFor of a normal magnitude in every lane, without its clamp to
// int8: scaleFastValues takes it only for shifts of -126 and more.
template <class F>
BRAID_WIRE_AVX2_STEP __m256i shiftLanes(__m256i m) {
  constexpr uint32_t maxBits = wire::maxFiniteBits<F>();
  const __m256i e = _mm256_sub_epi32(_mm256_srli_epi32(m, 23), _mm256_set1_epi32(int(maxBits >> 23)));
  const __m256i above = _mm256_cmpgt_epi32(_mm256_and_si256(m, _mm256_set1_epi32(0x7fffff)),
                                           _mm256_set1_epi32(int(maxBits & 0x7fffffu)));
  return _mm256_sub_epi32(e, above);
}

// A full group's scan and scale, or false where the portable codec must
// narrow it (an infinity or NaN, or a scale past kFastShiftMax). On true,
// x[] holds the 32 values times 2^-s, multiplied as encodeScannedGroup does,
// and the header is written (flags 0); on false x[] and the header are as
// they were.
template <class F>
BRAID_WIRE_AVX2_STEP bool scaleFastValues(__m256 x[4], uint8_t* header) {
  const __m256i absMask = _mm256_set1_epi32(0x7fffffff);
  __m256i a[4];
  for (int k = 0; k < 4; ++k) a[k] = _mm256_and_si256(_mm256_castps_si256(x[k]), absMask);
  const __m256i mv = largestMagnitude(a);
  const uint32_t m = uint32_t(_mm256_cvtsi256_si32(mv));
  if (m >= 0x7f800000u) return false;
  const int s = wire::groupShift<F>(m);
  if (s > wire::kFastShiftMax) return false;
  header[0] = uint8_t(int8_t(s));
  header[1] = 0;
  if (m < 0x00800000u || s < -126) {
    const wire::Pow2Factors k = wire::narrowingFactors(s);
    timesPow2(x, k.f1, k.f2);
    return true;
  }
  // The common case, a normal largest magnitude and a normal 2^-s: shiftFor
  // and 2^-s again in the vector lanes, so that the multiply waits for the
  // maximum only, not for its trip through the scalar unit (which the
  // branches above take, predicted).
  const __m256i sv = shiftLanes<F>(mv);
  const __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(127), sv), 23));
  for (int k = 0; k < 4; ++k) x[k] = _mm256_mul_ps(x[k], f1);
  return true;
}

// scaleFastValues of the 32 values at v.
template <class F>
BRAID_WIRE_AVX2_STEP bool scaleFastGroup(const float* v, uint8_t* header, __m256 x[4]) {
  for (int k = 0; k < 4; ++k) {
    // In 16-byte halves: the loops fill v[] with 16-byte stores at times, and
    // a 32-byte load across two of them waits for both to reach the cache
    // (a failed store forwarding, which cost half the encoder's speed).
    x[k] = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(v + 8 * k)), _mm_loadu_ps(v + 8 * k + 4), 1);
  }
  return scaleFastValues<F>(x, header);
}

// wire::encodeFinite's magnitude (no sign), eight lanes, in fewer steps.
// encodeFinite adds c = 2^(e + 23 - M) to |x| (e: |x|'s float exponent, at
// least F's smallest normal one, emin) and subtracts it again, which leaves
// |x| rounded to F's grid: L units of 2^(e - M), L <= 2^(M + 1). The sum
// |x| + c itself holds L in its mantissa field (c's is zero, and L is far
// below c's ulp count), and the code is ((e - emin) << M) + L: L counts the
// implicit one of a normal value, a rounding into the next binade lands at
// L = 2^(M + 1), and a subnormal's e is emin with L < 2^M. The same code as
// encodeFinite's two branches, from the same float addition.
// The magnitude's value on F's grid, (|x| + c) - c, is encodeFinite's
// rounding and so the code's widened magnitude: *rounded gets it, for the
// owner's hop, which keeps what it sends (no decode of the codes).
template <class F>
BRAID_WIRE_AVX2_STEP __m256i encodeMagnitude8(__m256 x, __m256* rounded) {
  constexpr int minNormalExp = 127 + 1 - F::kBias;
  const __m256i a = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff));
  const __m256i e = _mm256_max_epi32(_mm256_srli_epi32(a, 23), _mm256_set1_epi32(minNormalExp));
  const __m256 c = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(23 - F::kMant)), 23));
  const __m256 sum = _mm256_add_ps(_mm256_castsi256_ps(a), c);
  *rounded = _mm256_sub_ps(sum, c);
  const __m256i units = _mm256_and_si256(_mm256_castps_si256(sum), _mm256_set1_epi32(0x7fffff));
  const __m256i base = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(minNormalExp)), F::kMant);
  return _mm256_add_epi32(base, units);
}

// wire::decodeFinite, eight lanes (not yet times 2^s).
template <class F>
BRAID_WIRE_AVX2_STEP __m256 decodeFinite8(__m256i h) {
  const __m256i mag = _mm256_and_si256(h, _mm256_set1_epi32(int(F::kAbsMask)));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(int(F::kSign))), 31 - (F::kBits - 1));
  const __m256i normal =
      _mm256_add_epi32(_mm256_slli_epi32(mag, 23 - F::kMant), _mm256_set1_epi32(int(uint32_t(127 - F::kBias) << 23)));
  const __m256i sub = _mm256_castps_si256(
      _mm256_mul_ps(_mm256_cvtepi32_ps(mag), _mm256_set1_ps(bitsFloat(pow2Bits(1 - F::kBias - F::kMant)))));
  const __m256i isSub = _mm256_cmpgt_epi32(_mm256_set1_epi32(1 << F::kMant), mag);
  return _mm256_castsi256_ps(_mm256_or_si256(_mm256_blendv_epi8(normal, sub, isSub), sign));
}

// Scaled values x[] (scaleFastValues) as 32 fp8 codes of one byte; in
// rounded[], each value's narrowing widened again (still scaled, signed).
template <class F>
BRAID_WIRE_AVX2_STEP void storeFp8Codes(const __m256 x[4], uint8_t* codes, __m256 rounded[4]) {
  // Magnitudes fit seven bits: pack 32 -> 16 -> 8 bits (within 128-bit
  // lanes). Signs by saturation: a negative float's bits are a negative
  // int32, which packs to 0x8000, then 0x80; a positive one packs to at
  // most 0x7fff, then 0x7f. Then the four 8-value runs go back in order.
  __m256i mag[4];
  for (int k = 0; k < 4; ++k) {
    mag[k] = encodeMagnitude8<F>(x[k], &rounded[k]);
    rounded[k] = _mm256_or_ps(rounded[k], _mm256_and_ps(x[k], _mm256_set1_ps(-0.0f)));
  }
  const __m256i m01 = _mm256_packus_epi32(mag[0], mag[1]);
  const __m256i m23 = _mm256_packus_epi32(mag[2], mag[3]);
  const __m256i s01 = _mm256_packs_epi32(_mm256_castps_si256(x[0]), _mm256_castps_si256(x[1]));
  const __m256i s23 = _mm256_packs_epi32(_mm256_castps_si256(x[2]), _mm256_castps_si256(x[3]));
  const __m256i signs = _mm256_and_si256(_mm256_packs_epi16(s01, s23), _mm256_set1_epi8(char(0x80)));
  const __m256i c = _mm256_permutevar8x32_epi32(_mm256_or_si256(_mm256_packus_epi16(m01, m23), signs),
                                                _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes), c);
}

// An fp8 format's full fast group: 32 codes of one byte.
template <class F>
BRAID_WIRE_AVX2_STEP bool encodeFp8Group(const float* v, uint8_t* codes, uint8_t* header) {
  __m256 x[4], rounded[4];
  if (!scaleFastGroup<F>(v, header, x)) return false;
  storeFp8Codes<F>(x, codes, rounded);
  return true;
}

// Whether float16 holds every value of F's codes: no more exponent bits than
// float16's five. With five (e5m2), codes of the top exponent would read as
// float16's infinities and NaN, where decodeFinite reads finite values: a
// group holding one (only a damaged message does) takes the other steps.
template <class F>
constexpr bool kFp8ViaHalf = F::kBits == 8 && F::kBias <= 15;
template <class F>
constexpr bool kFp8TopExponentReadsInfinite = F::kBias == 15;

// 16 fp8 codes (16-bit lanes) as the float16 bits of their values times
// 2^(kBias - 15): the sign to bit 15 and the magnitude's exponent and
// mantissa fields under float16's, which reads a subnormal code as a float16
// subnormal of the same scale. Exact: float16 holds every such value.
template <class F>
BRAID_WIRE_AVX2_STEP __m256i fp8AsHalfBits(__m256i c) {
  static_assert(kFp8ViaHalf<F>, "a format whose every code float16 holds");
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(c, _mm256_set1_epi16(0x80)), 8);
  const __m256i mag = _mm256_slli_epi16(_mm256_and_si256(c, _mm256_set1_epi16(0x7f)), 10 - F::kMant);
  return _mm256_or_si256(sign, mag);
}

// 32 fp8 codes widened and times 2^(rescale - 15 + kBias), through float16
// (F16C): each code's value times 2^(kBias - 15) is exact, and one multiply
// by 2^rescale (a normal float) rounds the exact product once, as
// decodeFinite8's value times 2^s does: the same bits, in fewer steps than
// decodeFinite8's two cases and blend.
template <class F>
BRAID_WIRE_AVX2_STEP void decodeFp8ViaHalf(const uint8_t* codes, int rescale, __m256 x[4]) {
  for (int h = 0; h < 2; ++h) {
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + 16 * h));
    const __m256i half = fp8AsHalfBits<F>(_mm256_cvtepu8_epi16(c));
    x[2 * h] = _mm256_cvtph_ps(_mm256_castsi256_si128(half));
    x[2 * h + 1] = _mm256_cvtph_ps(_mm256_extracti128_si256(half, 1));
  }
  const __m256 k = _mm256_set1_ps(bitsFloat(pow2Bits(rescale)));
  for (int q = 0; q < 4; ++q) x[q] = _mm256_mul_ps(x[q], k);
}

// 32 fp8 codes widened and times 2^s, as decodeFastGroup does.
template <class F>
BRAID_WIRE_AVX2_STEP void decodeFp8Values(const uint8_t* codes, int s, __m256 x[4]) {
  if constexpr (kFp8ViaHalf<F>) {
    const int rescale = 15 - F::kBias + s;
    bool viaHalf = rescale >= -126 && rescale <= 127;
    if constexpr (kFp8TopExponentReadsInfinite<F>) {
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
      const __m256i top = _mm256_set1_epi8(char(F::kExpMask));
      viaHalf = viaHalf && _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_and_si256(c, top), top)) == 0;
    }
    if (viaHalf) return decodeFp8ViaHalf<F>(codes, rescale, x);
  }
  for (int q = 0; q < 4; ++q) {
    const __m128i c = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + 8 * q));
    x[q] = decodeFinite8<F>(_mm256_cvtepu8_epi32(c));
  }
  const wire::Pow2Factors k = wire::wideningFactors(s);
  timesPow2(x, k.f1, k.f2);
}

template <class F>
BRAID_WIRE_AVX2_STEP void decodeFp8Group(const uint8_t* codes, int s, float* v) {
  __m256 x[4];
  decodeFp8Values<F>(codes, s, x);
  for (int q = 0; q < 4; ++q) _mm256_storeu_ps(v + 8 * q, x[q]);
}

// A group's widened values (not yet scaled) times 2^s, s its header's shift,
// stored: the fp8 owner's rounding (storeFp8Codes' rounded[], the same bits
// as decoding the codes it wrote) and float16's widenings.
BRAID_WIRE_AVX2_STEP void storeWidened(__m256 widened[4], uint8_t shift, float* v) {
  const wire::Pow2Factors k = wire::wideningFactors(int(int8_t(shift)));
  timesPow2(widened, k.f1, k.f2);
  for (int q = 0; q < 4; ++q) _mm256_storeu_ps(v + 8 * q, widened[q]);
}

// The sums a wire carries (withSumFn's functors on float) eight lanes at a
// time, the same float operations in the same order (no fused multiply-add:
// these functions are not built for FMA). kLanes is false for a functor
// without a lane form: its groups go through the loop's array as before.
template <class Sum>
struct LaneSum {
  static constexpr bool kLanes = false;
};
template <>
struct LaneSum<SumFn<float>> {
  static constexpr bool kLanes = true;
  static BRAID_WIRE_AVX2_STEP __m256 apply(const SumFn<float>&, __m256 a, __m256 b) { return _mm256_add_ps(a, b); }
};
template <>
struct LaneSum<PreMulSumFn<float>> {
  static constexpr bool kLanes = true;
  static BRAID_WIRE_AVX2_STEP __m256 apply(const PreMulSumFn<float>& f, __m256 a, __m256 b) {
    return _mm256_add_ps(a, _mm256_mul_ps(b, _mm256_set1_ps(f.pre.scalar)));
  }
};

// A hop's full group in registers: the received fast group (codes, scale
// `inShift`) widened, summed with the 32 local values, narrowed into codes
// and header; into dst (unless null) the sums, or with `round` the
// narrowing's widened value. The bits of decode, the loop's sum and encode
// (or encodeRounded). False, with nothing written, where the sums are not a
// fast group (the loop then narrows them the portable way).
template <class F, class Sum>
BRAID_WIRE_AVX2_STEP bool sumFp8Group(const uint8_t* inCodes, int inShift, const float* src, const Sum& sum,
                                     uint8_t* codes, uint8_t* header, float* dst, bool round) {
  __m256 x[4], sums[4];
  decodeFp8Values<F>(inCodes, inShift, x);
  for (int q = 0; q < 4; ++q) x[q] = sums[q] = LaneSum<Sum>::apply(sum, x[q], _mm256_loadu_ps(src + 8 * q));
  if (!scaleFastValues<F>(x, header)) return false;
  __m256 rounded[4];
  storeFp8Codes<F>(x, codes, rounded);
  if (dst == nullptr) return true;
  if (round) {
    storeWidened(rounded, header[0], dst);
  } else {
    for (int q = 0; q < 4; ++q) _mm256_storeu_ps(dst + 8 * q, sums[q]);
  }
  return true;
}

// Two consecutive full groups as sumFp8Group, their steps side by side: one
// group's narrowing, a chain of dependent steps (the maximum, the scale, the
// codes), overlaps the other's, which a loop of single groups leaves to the
// CPU's reordering and measures slower. Only without stored sums (dst null,
// or the owner's rounding), where a group that turns out not to be fast has
// not yet been written anywhere.
template <class F, class Sum>
BRAID_WIRE_AVX2_STEP bool sumFp8Pair(const uint8_t* inCodes, const uint8_t* inHeader, const float* src, const Sum& sum,
                                    uint8_t* codes, uint8_t* header, float* dst) {
  __m256 x[4], y[4];
  decodeFp8Values<F>(inCodes, int(int8_t(inHeader[0])), x);
  decodeFp8Values<F>(inCodes + kWireGroup, int(int8_t(inHeader[2])), y);
  for (int q = 0; q < 4; ++q) {
    x[q] = LaneSum<Sum>::apply(sum, x[q], _mm256_loadu_ps(src + 8 * q));
    y[q] = LaneSum<Sum>::apply(sum, y[q], _mm256_loadu_ps(src + kWireGroup + 8 * q));
  }
  uint8_t h[4];
  if (!scaleFastValues<F>(x, h) || !scaleFastValues<F>(y, h + 2)) return false;
  __m256 rx[4], ry[4];
  storeFp8Codes<F>(x, codes, rx);
  storeFp8Codes<F>(y, codes + kWireGroup, ry);
  for (int k = 0; k < 4; ++k) header[k] = h[k];
  if (dst != nullptr) {
    storeWidened(rx, h[0], dst);
    storeWidened(ry, h[2], dst + kWireGroup);
  }
  return true;
}

// The portable codecs, out of line: inlined, their many registers and stack
// would be set up for the fast path too.
template <class Codec>
BRAID_WIRE_AVX2_PORTABLE void encodePortable(const float* v, uint32_t n, uint8_t* codes, uint8_t* header) {
  Codec::encode(v, n, codes, header);
}
template <class Codec>
BRAID_WIRE_AVX2_PORTABLE void decodePortable(const uint8_t* codes, const uint8_t* header, uint32_t n, float* v) {
  Codec::decode(codes, header, n, v);
}

}  // namespace wire_avx2

// float16: F16C's conversion rounds to nearest even with float16's
// subnormals, which is encodeFinite's result for every finite value up to
// the largest float16, where the scale puts a fast group's values. It widens
// exactly as decodeFinite does, except codes with the all-ones exponent
// (infinity, NaN), which decodeFinite reads as finite: a fast group never
// holds them unless the message is damaged, and then the portable codec
// decodes it.
struct WireF16Avx2 {
  static constexpr WireType kType = WireType::Float16;
  static constexpr bool kScaled = true;
  BRAID_WIRE_AVX2_ENCODE static void encode(const float* v, uint32_t n, uint8_t* codes, uint8_t* header) {
    __m256 x[4];
    if (n != kWireGroup || !wire_avx2::scaleFastGroup<numeric::HalfFormat>(v, header, x)) {
      return wire_avx2::encodePortable<WireF16>(v, n, codes, header);
    }
    for (int k = 0; k < 4; ++k) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(codes) + k,
                       _mm256_cvtps_ph(x[k], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
  }
  // encode, then decode (wire_loops.h's encodeRounded): the codes widened
  // from registers. A fast group's codes are finite, so no check.
  BRAID_WIRE_AVX2_ENCODE static void encodeRounded(float* v, uint32_t n, uint8_t* codes, uint8_t* header) {
    __m256 x[4];
    if (n != kWireGroup || !wire_avx2::scaleFastGroup<numeric::HalfFormat>(v, header, x)) {
      wire_avx2::encodePortable<WireF16>(v, n, codes, header);
      return wire_avx2::decodePortable<WireF16>(codes, header, n, v);
    }
    __m256 widened[4];
    for (int q = 0; q < 4; ++q) {
      const __m128i h = _mm256_cvtps_ph(x[q], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(codes) + q, h);
      widened[q] = _mm256_cvtph_ps(h);
    }
    wire_avx2::storeWidened(widened, header[0], v);
  }
  BRAID_WIRE_AVX2_FN static void decode(const uint8_t* codes, const uint8_t* header, uint32_t n, float* v) {
    if (n != kWireGroup || header[1] != 0) return wire_avx2::decodePortable<WireF16>(codes, header, n, v);
    const __m256i c0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes));
    const __m256i c1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes) + 1);
    const __m256i expMask = _mm256_set1_epi16(0x7c00);
    const __m256i allOnes = _mm256_or_si256(_mm256_cmpeq_epi16(_mm256_and_si256(c0, expMask), expMask),
                                            _mm256_cmpeq_epi16(_mm256_and_si256(c1, expMask), expMask));
    if (!_mm256_testz_si256(allOnes, allOnes)) return wire_avx2::decodePortable<WireF16>(codes, header, n, v);
    __m256 widened[4] = {_mm256_cvtph_ps(_mm256_castsi256_si128(c0)), _mm256_cvtph_ps(_mm256_extracti128_si256(c0, 1)),
                         _mm256_cvtph_ps(_mm256_castsi256_si128(c1)), _mm256_cvtph_ps(_mm256_extracti128_si256(c1, 1))};
    wire_avx2::storeWidened(widened, header[0], v);
  }
};

// The fp8 formats: encodeFinite and decodeFinite in integer and float lanes.
template <class F, class Portable, WireType W>
struct WireFp8Avx2 {
  static constexpr WireType kType = W;
  static constexpr bool kScaled = true;
  BRAID_WIRE_AVX2_ENCODE static void encode(const float* v, uint32_t n, uint8_t* codes, uint8_t* header) {
    if (n != kWireGroup || !wire_avx2::encodeFp8Group<F>(v, codes, header)) {
      wire_avx2::encodePortable<Portable>(v, n, codes, header);
    }
  }
  // encode, then decode (wire_loops.h's encodeRounded): the widened values
  // from the rounding itself, not from the codes.
  BRAID_WIRE_AVX2_ENCODE static void encodeRounded(float* v, uint32_t n, uint8_t* codes, uint8_t* header) {
    __m256 x[4], rounded[4];
    if (n != kWireGroup || !wire_avx2::scaleFastGroup<F>(v, header, x)) {
      wire_avx2::encodePortable<Portable>(v, n, codes, header);
      return wire_avx2::decodePortable<Portable>(codes, header, n, v);
    }
    wire_avx2::storeFp8Codes<F>(x, codes, rounded);
    wire_avx2::storeWidened(rounded, header[0], v);
  }
  // wire_loops.h's sumsInRegisters: a hop's group in registers, for the sums
  // LaneSum has.
  template <class Sum>
  static constexpr bool sumsInRegisters() {
    return wire_avx2::LaneSum<Sum>::kLanes;
  }
  template <class Sum>
  BRAID_WIRE_AVX2_FN static bool sumGroup(const uint8_t* inCodes, const uint8_t* inHeader, const float* src,
                                          const Sum& sum, uint8_t* codes, uint8_t* header, float* dst, bool round) {
    if (inHeader[1] != 0) return false;
    return wire_avx2::sumFp8Group<F>(inCodes, int(int8_t(inHeader[0])), src, sum, codes, header, dst, round);
  }
  // sumGroup for groups g and g + 1 at once (wire_avx2::sumFp8Pair); false,
  // with nothing written, where either is not a fast group or the sums are
  // to be stored unrounded (the loop then takes them one by one).
  template <class Sum>
  BRAID_WIRE_AVX2_FN static bool sumGroupPair(const uint8_t* inCodes, const uint8_t* inHeader, const float* src,
                                              const Sum& sum, uint8_t* codes, uint8_t* header, float* dst,
                                              bool round) {
    if (inHeader[1] != 0 || inHeader[3] != 0 || (dst != nullptr && !round)) return false;
    return wire_avx2::sumFp8Pair<F>(inCodes, inHeader, src, sum, codes, header, dst);
  }
  BRAID_WIRE_AVX2_FN static void decode(const uint8_t* codes, const uint8_t* header, uint32_t n, float* v) {
    if (n != kWireGroup || header[1] != 0) return wire_avx2::decodePortable<Portable>(codes, header, n, v);
    wire_avx2::decodeFp8Group<F>(codes, int(int8_t(header[0])), v);
  }
};
// e4m3's fast groups are e4m3 (a group with an infinity goes as e5m2, slow).
using WireE4M3Avx2 = WireFp8Avx2<numeric::E4M3Format, WireE4M3, WireType::Fp8E4M3>;
using WireE5M2Avx2 = WireFp8Avx2<numeric::E5M2Format, WireE5M2, WireType::Fp8E5M2>;

#endif  // BRAID_WIRE_AVX2

}  // namespace braid::reduce
