// The scaled wire codecs (wire_format.h) with the GPU's packed conversions:
// the same interface and the same bits as WireF16, WireE4M3 and WireE5M2, a
// fast group's narrowing two values per conversion (cvt.rn.satfinite.e4m3x2
// .f32 and e5m2x2 on sm_89+, cvt.rn.f16x2.f32) and its widening through
// float16 (cvt.rn.f16x2.e4m3x2 / e5m2x2, exact), where the portable codecs
// spend a dozen integer and float steps per value. A plan kernel's wire
// steps use them (kernels/executor/wire_step.h).
//
// Why the bits agree: a fast group (no infinity or NaN, scale at most
// 2^kFastShiftMax) is multiplied by 2^-s exactly as the portable encoder
// does, which puts every value within the format's largest finite, so the
// saturating conversion never saturates and rounds to nearest even, with
// subnormals, as encodeFinite does. Every fp8 value is a float16 value and
// every float16 value a float, so the widening is exact and the multiply by
// 2^s rounds as decodeFinite's does. The other groups, and codes that a fast
// group never holds (e4m3's NaN code, e5m2's and float16's top exponent: a
// damaged message), go through the portable codec.
//
// cuda_fp8.h and cuda_fp16.h compute the same conversions in software on the
// host (and on GPUs before sm_89), so tests/reduce/wire_codecs_packed_test.cc
// holds these codecs to the portable ones on the CPU; tests/kernels' PTX check
// sees the packed instructions in the plan kernel.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "reduce/wire_format.h"

namespace braid::reduce {

namespace wire_packed {

// Whether any code is one that no fast group holds: all the bits of `mask`
// set (e4m3: its NaN code; e5m2 and float16: the top exponent), which the
// portable decoder reads as a finite value and the hardware as NaN or
// infinity. Only a damaged message has one.
template <class Code>
BRAID_HD BRAID_INLINE bool anyCodeWithAll(const Code* codes, uint32_t n, uint32_t mask) {
  bool any = false;
  for (uint32_t j = 0; j < n; ++j) any |= (uint32_t(codes[j]) & mask) == mask;
  return any;
}

// A group's scale and fast-path check as the portable encoder makes them;
// false where the portable encoder must narrow it.
template <class F>
BRAID_HD BRAID_INLINE bool fastScale(const float* v, uint32_t n, int* s) {
  uint32_t special = 0;
  *s = wire::groupShift<F>(wire::scanGroup(v, n, &special));
  return special == 0 && *s <= wire::kFastShiftMax;
}

}  // namespace wire_packed

// fp8: F the format, I its conversions' interpretation, Portable the codec
// whose bits these are, kNotFast the magnitude bits a fast group never fills.
template <class F, __nv_fp8_interpretation_t I, class Portable, WireType W, uint32_t kNotFast>
struct WireFp8Packed {
  static constexpr WireType kType = W;
  static constexpr bool kScaled = true;
  BRAID_HD BRAID_INLINE_ON_HOST static void encode(const float* v, uint32_t n, uint8_t* codes, uint8_t* header) {
    int s = 0;
    if (!wire_packed::fastScale<F>(v, n, &s)) return Portable::encode(v, n, codes, header);
    header[0] = uint8_t(int8_t(s));
    header[1] = 0;
    const wire::Pow2Factors k = wire::narrowingFactors(s);
    uint32_t j = 0;
    for (; j + 1 < n; j += 2) {
      const float2 x = make_float2(v[j] * k.f1 * k.f2, v[j + 1] * k.f1 * k.f2);
      const __nv_fp8x2_storage_t c = __nv_cvt_float2_to_fp8x2(x, __NV_SATFINITE, I);
      codes[j] = uint8_t(c);
      codes[j + 1] = uint8_t(c >> 8);
    }
    if (j < n) codes[j] = __nv_cvt_float_to_fp8(v[j] * k.f1 * k.f2, __NV_SATFINITE, I);
  }
  BRAID_HD BRAID_INLINE_ON_HOST static void decode(const uint8_t* codes, const uint8_t* header, uint32_t n, float* v) {
    if (header[1] != 0 || wire_packed::anyCodeWithAll(codes, n, kNotFast))
      return Portable::decode(codes, header, n, v);
    const wire::Pow2Factors k = wire::wideningFactors(int(int8_t(header[0])));
    uint32_t j = 0;
    for (; j + 1 < n; j += 2) {
      const __nv_fp8x2_storage_t c = __nv_fp8x2_storage_t(codes[j] | uint32_t(codes[j + 1]) << 8);
      const float2 x = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(c, I)));
      v[j] = x.x * k.f1 * k.f2;
      v[j + 1] = x.y * k.f1 * k.f2;
    }
    if (j < n) v[j] = __half2float(__half(__nv_cvt_fp8_to_halfraw(codes[j], I))) * k.f1 * k.f2;
  }
};

// e4m3's fast groups are e4m3 (0x7f is its NaN); a group with an infinity
// goes as e5m2 through the portable codec, flagged.
using WireE4M3Packed = WireFp8Packed<numeric::E4M3Format, __NV_E4M3, WireE4M3, WireType::Fp8E4M3, 0x7f>;
using WireE5M2Packed =
    WireFp8Packed<numeric::E5M2Format, __NV_E5M2, WireE5M2, WireType::Fp8E5M2, numeric::E5M2Format::kExpMask>;

struct WireF16Packed {
  static constexpr WireType kType = WireType::Float16;
  static constexpr bool kScaled = true;
  BRAID_HD BRAID_INLINE_ON_HOST static void encode(const float* v, uint32_t n, uint8_t* codes, uint8_t* header) {
    int s = 0;
    if (!wire_packed::fastScale<numeric::HalfFormat>(v, n, &s)) return WireF16::encode(v, n, codes, header);
    header[0] = uint8_t(int8_t(s));
    header[1] = 0;
    const wire::Pow2Factors k = wire::narrowingFactors(s);
    uint16_t* c = reinterpret_cast<uint16_t*>(codes);
    uint32_t j = 0;
    for (; j + 1 < n; j += 2) {
      const __half2_raw h = __floats2half2_rn(v[j] * k.f1 * k.f2, v[j + 1] * k.f1 * k.f2);
      c[j] = h.x;
      c[j + 1] = h.y;
    }
    if (j < n) c[j] = __half_raw(__float2half_rn(v[j] * k.f1 * k.f2)).x;
  }
  BRAID_HD BRAID_INLINE_ON_HOST static void decode(const uint8_t* codes, const uint8_t* header, uint32_t n, float* v) {
    const uint16_t* c = reinterpret_cast<const uint16_t*>(codes);
    if (header[1] != 0 || wire_packed::anyCodeWithAll(c, n, numeric::HalfFormat::kExpMask))
      return WireF16::decode(codes, header, n, v);
    const wire::Pow2Factors k = wire::wideningFactors(int(int8_t(header[0])));
    uint32_t j = 0;
    for (; j + 1 < n; j += 2) {
      __half2_raw h;
      h.x = c[j];
      h.y = c[j + 1];
      const float2 x = __half22float2(__half2(h));
      v[j] = x.x * k.f1 * k.f2;
      v[j + 1] = x.y * k.f1 * k.f2;
    }
    if (j < n) {
      __half_raw h;
      h.x = c[j];
      v[j] = __half2float(__half(h)) * k.f1 * k.f2;
    }
  }
};

}  // namespace braid::reduce
