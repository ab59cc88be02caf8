// The plan kernel's packed wire codecs (src/reduce/wire_codecs_packed.h)
// against the portable ones of wire_format.h, bit for bit, on the CPU: here
// cuda_fp8.h and cuda_fp16.h compute the packed conversions in software, the
// same roundings the GPU's cvt instructions make. Every code of every format
// widened under scales across float's range, random and boundary groups
// narrowed (ties, subnormals, zeros of both signs, the format's largest,
// infinities, NaN, scales past 2^100 and below 2^-126), groups of every
// length up to 32, and damaged messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "reduce/wire_codecs_packed.h"
#include "reduce/wire_format.h"

namespace braid {
namespace {

using reduce::kWireGroup;

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

template <class Packed, class Portable>
void expectSameEncode(const std::vector<float>& v, const char* what) {
  const uint32_t n = uint32_t(v.size());
  uint8_t a[2 * kWireGroup], b[2 * kWireGroup], ha[2] = {0xaa, 0xaa}, hb[2] = {0xaa, 0xaa};
  std::memset(a, 0xcd, sizeof a);
  std::memset(b, 0xcd, sizeof b);
  Packed::encode(v.data(), n, a, ha);
  Portable::encode(v.data(), n, b, hb);
  ASSERT_EQ(ha[0], hb[0]) << what;
  ASSERT_EQ(ha[1], hb[1]) << what;
  for (uint32_t j = 0; j < n * reduce::wireCodeBytes(Packed::kType); ++j)
    ASSERT_EQ(a[j], b[j]) << what << ": byte " << j << " of a group of " << n << ", value "
                          << v[j / reduce::wireCodeBytes(Packed::kType)];
}

template <class Packed, class Portable>
void expectSameDecode(const uint8_t* codes, const uint8_t* header, uint32_t n, const char* what) {
  float a[kWireGroup], b[kWireGroup];
  Packed::decode(codes, header, n, a);
  Portable::decode(codes, header, n, b);
  for (uint32_t j = 0; j < n; ++j)
    ASSERT_EQ(bitsOf(a[j]), bitsOf(b[j])) << what << ": value " << j << " of " << n << ", scale "
                                          << int(int8_t(header[0])) << ", flags " << int(header[1]);
}

// Random groups of one kind each, as a sender would see them.
class Groups {
 public:
  explicit Groups(uint32_t seed) : rng_(seed) {}
  std::vector<float> next(uint32_t n) {
    std::vector<float> v(n);
    const int kind = int(rng_() % 8);
    const int exp = int(rng_() % 300) - 150;  // the group's magnitude, 2^-150 .. 2^150
    for (float& x : v) x = value(kind, exp);
    return v;
  }

 private:
  float around(int exp) {
    int e = exp + int(rng_() % 20) - 10 + 127;
    e = e < 0 ? 0 : e > 254 ? 254 : e;
    return floatOf(uint32_t(rng_() & 1u) << 31 | uint32_t(e) << 23 | (uint32_t(rng_()) & 0x7fffffu));
  }
  // A value whose mantissa ends in a tie for a few fp8 / float16 precisions.
  float tie(int exp) {
    const int keep = 2 + int(rng_() % 9);  // mantissa bits kept, then a lone 1
    const uint32_t mant = (uint32_t(rng_()) & ((1u << keep) - 1)) << (23 - keep) | 1u << (22 - keep);
    const int e = std::min(254, std::max(1, exp + 127));
    return floatOf(uint32_t(rng_() & 1u) << 31 | uint32_t(e) << 23 | mant);
  }
  float value(int kind, int exp) {
    switch (kind) {
      case 0: return floatOf(uint32_t(rng_()));  // any bits: NaN, infinities, subnormals
      case 1: return rng_() % 4 == 0 ? (rng_() % 2 ? 0.0f : -0.0f) : around(exp);
      case 2: return tie(exp + int(rng_() % 12));
      case 3: return rng_() % 16 == 0 ? INFINITY : around(exp);
      case 4: return around(-130);                      // subnormal floats, scales below 2^-126
      case 5: return rng_() % 2 ? 448.0f : -57344.0f;  // the formats' largest
      case 6: return floatOf(uint32_t(rng_() % 0x80u));  // the smallest subnormals
      default: return around(exp);
    }
  }
  std::mt19937 rng_;
};

template <class Packed, class Portable>
void encodeManyGroups(uint32_t seed) {
  Groups groups(seed);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t n = i % 5 == 0 ? 1 + uint32_t(i / 5) % kWireGroup : kWireGroup;
    expectSameEncode<Packed, Portable>(groups.next(n), "random group");
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(WireCodecsPacked, E4m3NarrowsAsThePortableCodec) {
  encodeManyGroups<reduce::WireE4M3Packed, reduce::WireE4M3>(1);
}
TEST(WireCodecsPacked, E5m2NarrowsAsThePortableCodec) {
  encodeManyGroups<reduce::WireE5M2Packed, reduce::WireE5M2>(2);
}
TEST(WireCodecsPacked, Float16NarrowsAsThePortableCodec) {
  encodeManyGroups<reduce::WireF16Packed, reduce::WireF16>(3);
}

// Every value a fast group can hold, scaled back up: each fp8 code times
// every scale reaches every rounding boundary of the format.
template <class Packed, class Portable>
void encodeEveryCodeValue() {
  for (uint32_t c = 0; c < 256; ++c)
    for (int s = -140; s <= 100; s += 3) {
      uint8_t code = uint8_t(c), header[2] = {uint8_t(int8_t(s)), 0};
      float x[1];
      Portable::decode(&code, header, 1, x);
      // The value, its neighbours one float ulp away (rounding just past a
      // tie), and a group that keeps the scale (the group's largest).
      for (int d = -1; d <= 1; ++d) {
        const float y = std::isfinite(x[0]) ? floatOf(bitsOf(x[0]) + uint32_t(d)) : x[0];
        std::vector<float> g = {y, -y, y * 0.5f, floatOf(bitsOf(y) | 0x80000000u)};
        expectSameEncode<Packed, Portable>(g, "a code's value");
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
}

TEST(WireCodecsPacked, EveryFp8ValueNarrowsAsThePortableCodec) {
  encodeEveryCodeValue<reduce::WireE4M3Packed, reduce::WireE4M3>();
  encodeEveryCodeValue<reduce::WireE5M2Packed, reduce::WireE5M2>();
}

// Every code at every scale, in a full group and in a short one; with the
// group flags of slow groups, and codes a fast group never holds (damaged).
template <class Packed, class Portable>
void decodeEveryCode() {
  uint8_t codes[kWireGroup];
  for (uint32_t first = 0; first < 256; first += kWireGroup)
    for (int s = -128; s <= 127; ++s)
      for (uint8_t flags : {uint8_t(0), reduce::kWireGroupSlow, uint8_t(reduce::kWireGroupSlow | reduce::kWireGroupE5M2)}) {
        for (uint32_t j = 0; j < kWireGroup; ++j) codes[j] = uint8_t(first + j);
        const uint8_t header[2] = {uint8_t(int8_t(s)), flags};
        expectSameDecode<Packed, Portable>(codes, header, kWireGroup, "every code");
        expectSameDecode<Packed, Portable>(codes, header, 7, "a short group");
        if (::testing::Test::HasFatalFailure()) return;
      }
}

TEST(WireCodecsPacked, EveryFp8CodeWidensAsThePortableCodec) {
  decodeEveryCode<reduce::WireE4M3Packed, reduce::WireE4M3>();
  decodeEveryCode<reduce::WireE5M2Packed, reduce::WireE5M2>();
}

TEST(WireCodecsPacked, EveryFloat16CodeWidensAsThePortableCodec) {
  uint16_t codes[kWireGroup];
  for (uint32_t first = 0; first < 65536; first += kWireGroup)
    for (int s : {-128, -127, -126, -100, -20, -1, 0, 1, 15, 100, 127})
      for (uint8_t flags : {uint8_t(0), reduce::kWireGroupSlow}) {
        for (uint32_t j = 0; j < kWireGroup; ++j) codes[j] = uint16_t(first + j);
        const uint8_t header[2] = {uint8_t(int8_t(s)), flags};
        expectSameDecode<reduce::WireF16Packed, reduce::WireF16>(reinterpret_cast<const uint8_t*>(codes), header,
                                                                 kWireGroup, "every float16 code");
        if (HasFatalFailure()) return;
      }
}

// Narrowed by one codec, widened by the other: a block's messages and the
// host's meet on the wire.
TEST(WireCodecsPacked, RoundTripsMeetThePortableCodecs) {
  Groups groups(4);
  for (int i = 0; i < 20000; ++i) {
    const std::vector<float> v = groups.next(kWireGroup);
    uint8_t codes[kWireGroup], header[2];
    reduce::WireE4M3Packed::encode(v.data(), kWireGroup, codes, header);
    float a[kWireGroup], b[kWireGroup];
    reduce::WireE4M3::decode(codes, header, kWireGroup, a);
    reduce::WireE4M3Packed::decode(codes, header, kWireGroup, b);
    ASSERT_EQ(0, std::memcmp(a, b, sizeof a)) << "group " << i;
  }
}

}  // namespace
}  // namespace braid
