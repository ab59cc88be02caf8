// The scaled wire codecs (wire_format.h) for the host's AVX2 units: the same
// interface and the same bits as WireF16, WireE4M3 and WireE5M2, a full group
// of 32 values in a handful of 8-lane instructions where GCC's vectorisation
// of the portable code spends several times as many (horizontal maxima, the
// select chains of encodeFinite, conversions between lane widths). Only full
// groups on the fast path (header flags 0) run here; a short last group, a
// group holding an infinity or NaN, one whose scale passes 2^100, and a
// float16 message with infinity or NaN codes in a fast group go through the
// portable codec unchanged.
//
// The functions are out of line and built for AVX2 and F16C in
// wire_codecs_avx2.cc: call them only where wireCodecsAvx2Usable() is true
// (host_wire.cc instantiates wire_loops.h's loops with them).
#pragma once

#include <cstdint>

#include "reduce/wire_format.h"

namespace braid::reduce {

// Whether this CPU runs the codecs below (AVX2 and F16C).
bool wireCodecsAvx2Usable();

struct WireF16Avx2 {
  static constexpr WireType kType = WireType::Float16;
  static constexpr bool kScaled = true;
  static void encode(const float* v, uint32_t n, uint8_t* codes, uint8_t* header);
  static void decode(const uint8_t* codes, const uint8_t* header, uint32_t n, float* v);
};

struct WireE4M3Avx2 {
  static constexpr WireType kType = WireType::Fp8E4M3;
  static constexpr bool kScaled = true;
  static void encode(const float* v, uint32_t n, uint8_t* codes, uint8_t* header);
  static void decode(const uint8_t* codes, const uint8_t* header, uint32_t n, float* v);
};

struct WireE5M2Avx2 {
  static constexpr WireType kType = WireType::Fp8E5M2;
  static constexpr bool kScaled = true;
  static void encode(const float* v, uint32_t n, uint8_t* codes, uint8_t* header);
  static void decode(const uint8_t* codes, const uint8_t* header, uint32_t n, float* v);
};

}  // namespace braid::reduce
