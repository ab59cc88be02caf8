// Fixed point for reproducible mode (core/reproducible.h): float32 values
// scaled by a power of two and rounded once to int64, whose sums are exact in
// any order, and the sums back to float32. The conversions loop over every
// element of a call, so they are written for the vector units (AVX2 where the
// CPU has it, chosen at run time).
//
// A fixed-point step (WireType::Fixed64, kernels/executor/wire_step.h) sends
// and receives the integers and never stores them: it turns its float32
// contribution into fixed point as it adds it to what it received, and the
// owner's last step turns the sum back into float32, so no pass of its own
// converts a buffer and no int64 copy of it is written.
#pragma once

#include <cstddef>
#include <cstdint>

namespace braid::reduce::fixed {

// The largest finite magnitude's bits among `count` float32 bit patterns,
// and in *special whether any is inf or NaN.
uint32_t floatBlockScan(const uint32_t* bits, size_t count, uint32_t* special);

// Float32 values in fixed point keep this many bits: |x| * 2^shift < 2^51,
// so that a sum of them (core/reproducible.h keeps it below 2^51 too) is
// exact in a double, and the vector units convert each way with one add.
constexpr int kFloatBits = 51;

// round(x * 2^shift) to nearest even for the float32 bit patterns `bits`
// (|x| * 2^shift < 2^51); NaN and inf give 0.
void floatToFixed(const uint32_t* bits, size_t count, int shift, int64_t* out);

// out = in + floatToFixed(bits) (out may be in).
void floatToFixedAdd(const uint32_t* bits, size_t count, int shift, const int64_t* in, int64_t* out);

// float(double(sum) * unscale) for |sum| < 2^51 (the cast is exact).
void fixedToFloat(const int64_t* sums, size_t count, double unscale, float* out);

// The scale back of a block: 2^-shift over the divisor (avg: the ranks).
double unscaleOf(int shift, int divisor);

// One step of a fixed-point wire over `count` consecutive elements of the
// operation's input, from element `firstElem` (so block (firstElem + i) /
// kBlockElems holds element i and shifts[] gives its shift). value_i = in_i
// (or 0) + the fixed point of src_i; out_i = value_i where out is set;
// dst_i = value_i back in float32 where dst is set. A step that only
// forwards copies its message instead (wire_step.h).
struct FixedPiece {
  const int64_t* in = nullptr;
  int64_t* out = nullptr;
  const float* src = nullptr;
  float* dst = nullptr;
  uint64_t count = 0;
  uint64_t firstElem = 0;
  const int32_t* shifts = nullptr;
  int divisor = 1;
};
constexpr size_t kBlockElems = 256;
void runFixedPiece(const FixedPiece& p);

}  // namespace braid::reduce::fixed
