// The wire formats of src/reduce/wire_format.h: message sizes, the per-group
// scale, the stated rounding bound, non-finite values and saturation, and
// that narrowing what was narrowed changes nothing (an owner's rounded value
// re-sent reaches its peers unchanged).
#include "reduce/wire_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace braid {
namespace {

const reduce::WireType kTypes[] = {reduce::WireType::BFloat16, reduce::WireType::Float16, reduce::WireType::Fp8E4M3, reduce::WireType::Fp8E5M2};

// u and q of the header comment: relative and (over the group's largest) absolute error.
double unitRoundoff(reduce::WireType w) {
  switch (w) {
    case reduce::WireType::BFloat16: return std::ldexp(1.0, -8);
    case reduce::WireType::Float16: return std::ldexp(1.0, -11);
    case reduce::WireType::Fp8E4M3: return std::ldexp(1.0, -4);
    default: return std::ldexp(1.0, -3);
  }
}
double floorOverLargest(reduce::WireType w) {
  switch (w) {
    case reduce::WireType::Float16: return std::ldexp(1.0, -24) / 65504;
    case reduce::WireType::Fp8E4M3: return std::ldexp(1.0, -9) / 448;
    case reduce::WireType::Fp8E5M2: return std::ldexp(1.0, -16) / 57344;
    default: return 0;
  }
}

std::vector<float> roundTrip(reduce::WireType w, const std::vector<float>& v) {
  std::vector<uint8_t> msg(wireBytes(w, v.size()));
  std::vector<float> out(v.size());
  for (uint64_t g = 0; g < reduce::wireGroups(v.size()); ++g) {
    const uint32_t n = uint32_t(std::min<uint64_t>(reduce::kWireGroup, v.size() - g * reduce::kWireGroup));
    wireEncodeGroup(w, v.data() + g * reduce::kWireGroup, n, wireCodesOf(w, msg.data(), v.size(), g),
                    reduce::wireHeaderOf(msg.data(), g));
  }
  for (uint64_t g = 0; g < reduce::wireGroups(v.size()); ++g) {
    const uint32_t n = uint32_t(std::min<uint64_t>(reduce::kWireGroup, v.size() - g * reduce::kWireGroup));
    wireDecodeGroup(w, wireCodesOf(w, msg.data(), v.size(), g), reduce::wireHeaderOf(msg.data(), g), n,
                    out.data() + g * reduce::kWireGroup);
  }
  return out;
}

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(WireFormat, MessageSizes) {
  EXPECT_EQ(wireBytes(reduce::WireType::BFloat16, 100), 200u);
  EXPECT_EQ(wireBytes(reduce::WireType::Float16, 100), 16u + 200u);      // 4 groups: 8 header bytes, padded
  EXPECT_EQ(wireBytes(reduce::WireType::Fp8E4M3, 64), 16u + 64u);
  EXPECT_EQ(wireBytes(reduce::WireType::Fp8E5M2, 1 << 20), 65536u + (1u << 20));  // 2 bytes per 32 values
  EXPECT_EQ(wireBytes(reduce::WireType::Fp8E4M3, 0), 0u);
  EXPECT_EQ(wireBytes(reduce::WireType::None, 10), 40u);
}

// Values spread over 2^-40 .. 2^40 within a message, each group's largest
// lands in the format's top binade, and every value errs by at most u|v| + qM.
TEST(WireFormat, EveryValueWithinTheStatedBound) {
  std::mt19937 rng(7);
  std::vector<float> v(32 * 200 + 5);
  for (size_t i = 0; i < v.size(); ++i) {
    const int groupExp = int((i / 32) % 80) - 40;  // a group's magnitudes share a range
    const float mant = 1.0f + float(rng() % 1000) / 1000.0f;
    v[i] = std::ldexp(rng() % 2 ? mant : -mant, groupExp - int(rng() % 12));
    if (rng() % 9 == 0) v[i] = 0;
  }
  for (reduce::WireType w : kTypes) {
    SCOPED_TRACE(wireTypeName(w));
    const std::vector<float> r = roundTrip(w, v);
    for (size_t g = 0; g * 32 < v.size(); ++g) {
      float m = 0;
      for (size_t i = g * 32; i < std::min(v.size(), g * 32 + 32); ++i) m = std::max(m, std::fabs(v[i]));
      for (size_t i = g * 32; i < std::min(v.size(), g * 32 + 32); ++i) {
        const double err = std::fabs(double(r[i]) - double(v[i]));
        // The float arithmetic of the scaling adds at most half a float ulp.
        const double bound = unitRoundoff(w) * std::fabs(v[i]) + floorOverLargest(w) * m +
                             std::ldexp(1.0, -24) * std::fabs(v[i]);
        ASSERT_LE(err, bound) << "value " << i << " = " << v[i] << " came back as " << r[i];
      }
    }
  }
}

// Gradient-sized values: without a scale fp8 would flush them to zero
// (e4m3's smallest is 2^-9); small integers times a power of two come back exact.
TEST(WireFormat, SmallValuesAreScaledNotFlushed) {
  std::vector<float> v(64);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::ldexp(float(int(i % 15) - 7), -30 - int(i / 32) * 60);
  for (reduce::WireType w : kTypes) {
    if (w == reduce::WireType::Fp8E5M2) continue;  // 2 mantissa bits: 5 and 7 round
    SCOPED_TRACE(wireTypeName(w));
    EXPECT_EQ(roundTrip(w, v), v);
  }
}

// Narrowing a narrowed value in the same groups, or in parts of them, is
// exact: an owner's rounded result, sent again from its buffer in the same
// pieces, reaches its peers unchanged. (Groups that straddle two of the first
// narrowing's need not be: the wire step sends finished values in the pieces
// that made them.)
TEST(WireFormat, NarrowingANarrowedValueChangesNothing) {
  std::mt19937 rng(3);
  std::vector<float> v(32 * 40);
  for (float& x : v) x = std::ldexp(float(int(rng() % 2001) - 1000) / 1000.0f, int(rng() % 40) - 20);
  for (reduce::WireType w : kTypes) {
    SCOPED_TRACE(wireTypeName(w));
    const std::vector<float> once = roundTrip(w, v);
    EXPECT_EQ(roundTrip(w, once), once);
    // A shorter message: its last group a part of one.
    std::vector<float> head(once.begin(), once.begin() + 32 * 39 + 7);
    EXPECT_EQ(roundTrip(w, head), head);
  }
}

TEST(WireFormat, NonFiniteValuesStayWhatTheyAre) {
  const float inf = INFINITY;
  for (reduce::WireType w : kTypes) {
    SCOPED_TRACE(wireTypeName(w));
    std::vector<float> v(40, 1.5f);
    v[3] = inf;
    v[4] = -inf;
    v[5] = NAN;
    v[6] = 1e-3f;
    v[35] = NAN;
    const std::vector<float> r = roundTrip(w, v);
    EXPECT_EQ(r[3], inf);
    EXPECT_EQ(r[4], -inf);
    EXPECT_TRUE(std::isnan(r[5]));
    EXPECT_TRUE(std::isnan(r[35]));
    EXPECT_EQ(r[0], 1.5f);  // finite neighbours keep their values
    // e4m3's group 0 holds an infinity: coded in e5m2 (u = 2^-3).
    EXPECT_NEAR(r[6], 1e-3, 1e-3 * 0.125 + 1e-9);
  }
}

// The largest floats stay finite on every wire type (bfloat16 and a scaled
// group both could round past FLT_MAX).
TEST(WireFormat, FiniteValuesNeverBecomeInfinite) {
  const float big = std::nextafter(3.4028235e38f, 0.0f);
  std::vector<float> v = {big, -big, 3.39e38f, 1e38f, 1.0f};
  for (reduce::WireType w : kTypes) {
    SCOPED_TRACE(wireTypeName(w));
    for (float r : roundTrip(w, v)) EXPECT_TRUE(std::isfinite(r)) << r;
    const std::vector<float> r = roundTrip(w, v);
    EXPECT_GT(r[0], 3.0e38f);
    EXPECT_LT(r[1], -3.0e38f);
  }
}

// fp8 e4m3 has no infinity: a group holding one is coded in e5m2 (flag set);
// the other groups of the message keep e4m3's extra mantissa bit.
TEST(WireFormat, AnE4M3GroupWithAnInfinitySwitchesToE5M2Alone) {
  std::vector<float> v(64, 1.0f + 1.0f / 8);  // exact in e4m3, rounds in e5m2
  v[40] = INFINITY;
  std::vector<uint8_t> msg(wireBytes(reduce::WireType::Fp8E4M3, v.size()));
  for (uint64_t g = 0; g < 2; ++g)
    wireEncodeGroup(reduce::WireType::Fp8E4M3, v.data() + g * 32, 32, wireCodesOf(reduce::WireType::Fp8E4M3, msg.data(), 64, g),
                    reduce::wireHeaderOf(msg.data(), g));
  EXPECT_EQ(msg[1], 0);                // group 0: e4m3
  EXPECT_EQ(msg[3], reduce::kWireGroupSlow | reduce::kWireGroupE5M2);   // group 1: e5m2
  const std::vector<float> r = roundTrip(reduce::WireType::Fp8E4M3, v);
  EXPECT_EQ(r[0], 1.125f);
  EXPECT_EQ(r[40], INFINITY);
  EXPECT_NE(r[41], 1.125f);  // e5m2 has two mantissa bits
}

// The scale is exact integer work: 448 * 2^k narrows to e4m3's largest code.
TEST(WireFormat, TheGroupsLargestLandsInTheTopBinade) {
  for (int k : {-140, -100, -3, 0, 5, 100, 119}) {
    std::vector<float> v(32, 0.0f);
    v[0] = std::ldexp(448.0f, k);
    std::vector<uint8_t> msg(wireBytes(reduce::WireType::Fp8E4M3, 32));
    wireEncodeGroup(reduce::WireType::Fp8E4M3, v.data(), 32, wireCodesOf(reduce::WireType::Fp8E4M3, msg.data(), 32, 0),
                    msg.data());
    if (k >= -128 + 0 && std::isnormal(v[0])) {
      EXPECT_EQ(int(int8_t(msg[0])), k) << k;
      EXPECT_EQ(msg[16], 0x7e) << k;  // e4m3's largest finite
    }
    EXPECT_EQ(bitsOf(roundTrip(reduce::WireType::Fp8E4M3, v)[0]), bitsOf(v[0])) << k;
  }
}

// The fast path (FPU rounding, groups without infinities or NaN) gives the
// codes and values of numeric.h's converters, over every float of the
// format's range (a stride through the bit patterns, plus every boundary
// between two codes and the ties between them).
template <class F>
void expectFastPathMatches(float largest) {
  const uint32_t top = bitsOf(largest);
  auto check = [top](uint32_t bits) {
    if ((bits & 0x7fffffffu) > top) return;  // past the largest finite (or a wrapped 0 - 1)
    float x;
    std::memcpy(&x, &bits, 4);
    for (float y : {x, -x}) ASSERT_EQ(reduce::wire::encodeFinite<F>(y), reduce::numeric::fromFloat<F>(y)) << y;
  };
  for (uint32_t b = 0; b <= top; b += 97) check(b);
  for (uint32_t code = 0; code <= F::kMaxFinite; ++code) {
    const float v = reduce::numeric::toFloat<F>(code);
    ASSERT_EQ(bitsOf(reduce::wire::decodeFinite<F>(code)), bitsOf(v)) << code;
    ASSERT_EQ(bitsOf(reduce::wire::decodeFinite<F>(code | F::kSign)), bitsOf(-v)) << code;
    const uint32_t vb = bitsOf(v);
    for (uint32_t near : {vb - 1, vb, vb + 1}) check(near);
    if (code < F::kMaxFinite) {  // the tie halfway to the next code
      const float mid = (v + reduce::numeric::toFloat<F>(code + 1)) / 2;
      for (uint32_t near : {bitsOf(mid) - 1, bitsOf(mid), bitsOf(mid) + 1}) check(near);
    }
  }
}

TEST(WireFormat, FastPathGivesTheConvertersCodes) {
  expectFastPathMatches<reduce::numeric::E4M3Format>(448.0f);
  expectFastPathMatches<reduce::numeric::E5M2Format>(57344.0f);
  expectFastPathMatches<reduce::numeric::HalfFormat>(65504.0f);
}

}  // namespace
}  // namespace braid
