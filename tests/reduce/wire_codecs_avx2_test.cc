// The host's fast wire path against the portable reference, bit for bit:
// the AVX2 codecs (src/reduce/wire_codecs_avx2.h) against the portable ones
// of wire_format.h group by group, and runWirePieceOnHost (whatever the CPU
// makes it run) against wire_loops.h's portable loops built here for the
// baseline CPU, over every wire type, piece variant and data type, counts
// that leave a short last group, and inputs with every kind of float:
// zeros of both signs, subnormals, infinities, NaN, scales past 2^100 and
// below 2^-126, and damaged messages. The portable loops in a plan kernel's
// shape (reduce::kBlockLoops) against the same reference: built here, or, as
// tests/gpu builds this file again (BRAID_WIRE_LOOPS_ON_GPU), built for the
// GPU and run there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "reduce/host_reduce.h"
#include "reduce/wire_codecs_avx2.h"
#include "reduce/wire_loops.h"
#if defined(BRAID_WIRE_LOOPS_ON_GPU)
#include "gpu_env.h"
#include "wire_loops_on_gpu.h"
// The pieces' tests hold the GPU's loops to the reference: without a GPU
// they skip (or fail under BRAID_REQUIRE_GPU).
#define BRAID_PIECES_NEED_GPU() GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonHere())
#else
#define BRAID_PIECES_NEED_GPU() \
  do {                          \
  } while (0)
#endif

namespace braid {
namespace {

using reduce::kWireGroup;
using reduce::WirePiece;
using reduce::WireType;

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Values of one group of the kind `kind` picks: most kinds are finite.
class Values {
 public:
  explicit Values(uint32_t seed) : rng_(seed) {}

  float any() { return floatOf(uint32_t(rng_())); }  // every bit pattern, NaN and subnormals included
  float finiteAround(int exp) {
    const uint32_t mant = uint32_t(rng_()) & 0x7fffffu;
    int e = exp + int(rng_() % 24) - 12 + 127;
    e = e < 0 ? 0 : e > 254 ? 254 : e;
    return floatOf((uint32_t(rng_() & 1u) << 31) | uint32_t(e) << 23 | mant);
  }
  // A group of n values of one kind, as a sender would see them.
  void group(float* v, uint32_t n) {
    const uint32_t kind = uint32_t(rng_() % 12);
    const int exp = int(rng_() % 250) - 125;  // the group's magnitude, 2^-125 .. 2^124
    for (uint32_t j = 0; j < n; ++j) {
      switch (kind) {
        case 0: v[j] = any(); break;
        case 1: v[j] = 0.0f; break;
        case 2: v[j] = rng_() % 2 ? -0.0f : 0.0f; break;
        case 3: v[j] = floatOf((uint32_t(rng_() & 1u) << 31) | (uint32_t(rng_()) & 0x7fffffu)); break;  // subnormal
        case 4: v[j] = finiteAround(120); break;   // scales past 2^100
        case 5: v[j] = finiteAround(-120); break;  // scales below 2^-126
        case 6: {  // halfway cases of the narrow formats' rounding: few mantissa bits set
          const uint32_t mant = (uint32_t(rng_()) & 0xfu) << (19 - rng_() % 16);
          v[j] = floatOf((uint32_t(rng_() & 1u) << 31) | uint32_t(127 + exp % 20) << 23 | (mant & 0x7fffffu));
          break;
        }
        default: v[j] = finiteAround(exp); break;
      }
      // Now and then a special value in an otherwise ordinary group.
      const uint32_t r = uint32_t(rng_() % 400);
      if (r == 0) v[j] = floatOf(0x7f800000u | uint32_t(rng_() & 1u) << 31);   // infinity
      if (r == 1) v[j] = floatOf(0x7fc00000u | (uint32_t(rng_()) & 0x803fffffu));  // NaN
      if (r == 2) v[j] = floatOf(0x7f7fffffu - uint32_t(rng_() % 8));           // near FLT_MAX
      if (r == 3) v[j] = rng_() % 2 ? -0.0f : 0.0f;
    }
  }
  void fill(float* v, uint64_t n) {
    for (uint64_t i = 0; i < n; i += kWireGroup) group(v + i, uint32_t(n - i < kWireGroup ? n - i : kWireGroup));
  }
  uint32_t next() { return uint32_t(rng_()); }

 private:
  std::mt19937_64 rng_;
};

// ---- the codecs, group by group -------------------------------------------

template <class Portable, class Fast>
void expectCodecsAgree(uint32_t seed) {
  const uint32_t codeBytes = reduce::wireCodeBytes(Portable::kType);
  Values values(seed);
  for (int iter = 0; iter < 40000; ++iter) {
    const uint32_t n = iter % 4 == 3 ? 1 + values.next() % kWireGroup : kWireGroup;
    float v[kWireGroup];
    values.group(v, n);
    uint8_t codesA[kWireGroup * 2] = {}, codesB[kWireGroup * 2] = {}, headerA[2] = {}, headerB[2] = {};
    Portable::encode(v, n, codesA, headerA);
    Fast::encode(v, n, codesB, headerB);
    ASSERT_EQ(0, std::memcmp(headerA, headerB, 2)) << "iteration " << iter << " n " << n;
    ASSERT_EQ(0, std::memcmp(codesA, codesB, n * codeBytes)) << "iteration " << iter << " n " << n;

    // Narrowed and widened back in one step (a rounding step's encodeRounded).
    float a[kWireGroup], b[kWireGroup];
    uint8_t codesC[kWireGroup * 2] = {}, headerC[2] = {};
    std::memcpy(b, v, sizeof b);
    Fast::encodeRounded(b, n, codesC, headerC);
    Portable::decode(codesA, headerA, n, a);
    ASSERT_EQ(0, std::memcmp(headerA, headerC, 2)) << "encodeRounded, iteration " << iter;
    ASSERT_EQ(0, std::memcmp(codesA, codesC, n * codeBytes)) << "encodeRounded, iteration " << iter;
    ASSERT_EQ(0, std::memcmp(a, b, n * 4)) << "encodeRounded, iteration " << iter;

    // Widen what was sent, then a damaged message: random codes under a fast
    // or random header.
    Portable::decode(codesA, headerA, n, a);
    Fast::decode(codesA, headerA, n, b);
    ASSERT_EQ(0, std::memcmp(a, b, n * 4)) << "decoding, iteration " << iter;
    for (uint32_t j = 0; j < n * codeBytes; ++j) codesA[j] = uint8_t(values.next());
    headerA[0] = uint8_t(values.next());
    headerA[1] = values.next() % 4 == 0 ? uint8_t(values.next()) : 0;
    Portable::decode(codesA, headerA, n, a);
    Fast::decode(codesA, headerA, n, b);
    ASSERT_EQ(0, std::memcmp(a, b, n * 4)) << "decoding random codes, iteration " << iter;
  }
  // Every code of the format under every scale, in fast groups.
  for (int s = -128; s < 128; ++s) {
    for (uint32_t first = 0; first < (codeBytes == 1 ? 256u : 65536u); first += kWireGroup) {
      uint8_t codes[kWireGroup * 2];
      for (uint32_t j = 0; j < kWireGroup; ++j) {
        const uint32_t c = first + j;
        std::memcpy(codes + j * codeBytes, &c, codeBytes);  // little-endian: the low bytes
      }
      const uint8_t header[2] = {uint8_t(int8_t(s)), 0};
      float a[kWireGroup], b[kWireGroup];
      Portable::decode(codes, header, kWireGroup, a);
      Fast::decode(codes, header, kWireGroup, b);
      ASSERT_EQ(0, std::memcmp(a, b, sizeof a)) << "codes from " << first << " scale " << s;
    }
  }
}

TEST(WireCodecsAvx2, Float16GroupsMatchThePortableCodec) {
  if (!reduce::wireCodecsAvx2Usable()) GTEST_SKIP() << "no AVX2 and F16C on this CPU";
  expectCodecsAgree<reduce::WireF16, reduce::WireF16Avx2>(1);
}
TEST(WireCodecsAvx2, E4M3GroupsMatchThePortableCodec) {
  if (!reduce::wireCodecsAvx2Usable()) GTEST_SKIP() << "no AVX2 and F16C on this CPU";
  expectCodecsAgree<reduce::WireE4M3, reduce::WireE4M3Avx2>(2);
}
TEST(WireCodecsAvx2, E5M2GroupsMatchThePortableCodec) {
  if (!reduce::wireCodecsAvx2Usable()) GTEST_SKIP() << "no AVX2 and F16C on this CPU";
  expectCodecsAgree<reduce::WireE5M2, reduce::WireE5M2Avx2>(3);
}

// ---- whole pieces through runWirePieceOnHost ------------------------------

// The portable loops, built here for the baseline CPU: the reference.
void runPortable(const WirePiece& p) {
  if (p.data == ncclBfloat16) {
    if (p.wire == WireType::Fp8E4M3) return reduce::runWirePieceAs<reduce::WireE4M3, reduce::BFloat16>(p);
    if (p.wire == WireType::Fp8E5M2) return reduce::runWirePieceAs<reduce::WireE5M2, reduce::BFloat16>(p);
    return;
  }
  reduce::withWireCodec(p.wire, [&](auto codec) { reduce::runWirePieceAs<decltype(codec)>(p); });
}

// The loops as a plan kernel's block builds them (reduce::kBlockLoops: one
// loop, bfloat16 group by group): the same bits.
void runBlockShape(const WirePiece& p) {
#if defined(BRAID_WIRE_LOOPS_ON_GPU)
  gputest::runWirePieceLoopsOnGpu(p);
#else
  if (p.data == ncclBfloat16) {
    if (p.wire == WireType::Fp8E4M3) return reduce::runWirePieceAs<reduce::WireE4M3, reduce::BFloat16, true>(p);
    if (p.wire == WireType::Fp8E5M2) return reduce::runWirePieceAs<reduce::WireE5M2, reduce::BFloat16, true>(p);
    return;
  }
  reduce::withWireCodec(p.wire, [&](auto codec) { reduce::runWirePieceAs<decltype(codec), float, true>(p); });
#endif
}

// Equal bit for bit, except that two NaN are equal whatever their payloads:
// which operand's NaN a sum of two NaN keeps depends on the compiler's
// operand order (GCC's -O3 swaps them in one build of the loops and not the
// other), and a GPU's sum of NaN is its one canonical NaN anyway.
bool sameValues(ncclDataType_t data, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return false;
  const size_t elem = data == ncclBfloat16 ? 2 : 4;
  for (size_t i = 0; i + elem <= a.size(); i += elem) {
    uint32_t x = 0, y = 0;
    std::memcpy(&x, &a[i], elem);
    std::memcpy(&y, &b[i], elem);
    if (elem == 2) {
      x <<= 16;
      y <<= 16;
    }
    const bool nans = (x & 0x7fffffffu) > 0x7f800000u && (y & 0x7fffffffu) > 0x7f800000u;
    if (x != y && !nans) return false;
  }
  return true;
}

// Two messages of `count` values that widen to the same values (sameValues).
bool sameMessages(WireType w, uint64_t count, std::vector<uint8_t> a, std::vector<uint8_t> b) {
  std::vector<float> va(count), vb(count);
  for (uint64_t g = 0; g < reduce::wireGroups(count); ++g) {
    const uint32_t n = uint32_t(std::min<uint64_t>(reduce::kWireGroup, count - g * reduce::kWireGroup));
    reduce::wireDecodeGroup(w, reduce::wireCodesOf(w, a.data(), count, g), reduce::wireHeaderOf(a.data(), g), n,
                            &va[g * reduce::kWireGroup]);
    reduce::wireDecodeGroup(w, reduce::wireCodesOf(w, b.data(), count, g), reduce::wireHeaderOf(b.data(), g), n,
                            &vb[g * reduce::kWireGroup]);
  }
  auto bytes = [](const std::vector<float>& v) {
    std::vector<uint8_t> out(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  };
  return sameValues(ncclFloat32, bytes(va), bytes(vb));
}

struct Variant {
  bool in, out, src, dst, round, inPlace;
};

// The piece variants a step can make (wire_step.h): receive and/or send,
// with or without a local operand, stored or not, rounded or not.
std::vector<Variant> variants() {
  std::vector<Variant> all;
  for (int bits = 0; bits < 32; ++bits) {
    Variant v{bool(bits & 1), bool(bits & 2), bool(bits & 4), bool(bits & 8), bool(bits & 16), false};
    if (!v.in && !v.src) continue;                 // nothing to compute from
    if (!v.out && !v.dst) continue;                // nothing to produce
    if (v.round && !v.dst) continue;               // a rounding nobody stores
    all.push_back(v);
    if (v.src && v.dst) all.push_back({v.in, v.out, v.src, v.dst, v.round, true});  // dst == src
  }
  return all;
}

std::vector<reduce::RedOp> ops() {
  std::vector<reduce::RedOp> all(6);
  all[1].kind = reduce::RedKind::Prod;
  all[2].kind = reduce::RedKind::Max;
  all[3].kind = reduce::RedKind::Min;
  all[4].kind = reduce::RedKind::PreMulSum;
  const float scalar = 0.3125f;
  std::memcpy(all[4].scalar, &scalar, sizeof scalar);
  all[5].kind = reduce::RedKind::SumPostDiv;
  all[5].divisor = 3;
  return all;
}

// Values as a step's local operand: float32, or bfloat16 (fp8 wires).
std::vector<uint8_t> operandBytes(const std::vector<float>& values, ncclDataType_t data) {
  const size_t elem = data == ncclBfloat16 ? 2 : 4;
  std::vector<uint8_t> bytes(values.size() * elem);
  for (size_t i = 0; i < values.size(); ++i) {
    if (data == ncclBfloat16) {
      const uint16_t b = reduce::numeric::bf16FromFloat(values[i]);
      std::memcpy(&bytes[i * 2], &b, 2);
    } else {
      std::memcpy(&bytes[i * 4], &values[i], 4);
    }
  }
  return bytes;
}

// The message the portable loops send for these float32 values.
std::vector<uint8_t> portableMessage(WireType w, const std::vector<float>& values) {
  std::vector<uint8_t> msg(reduce::wireBytes(w, values.size()));
  WirePiece enc;
  enc.wire = w;
  enc.src = values.data();
  enc.out = msg.data();
  enc.count = values.size();
  runPortable(enc);
  return msg;
}

void expectPiecesAgree(WireType w, ncclDataType_t data, uint64_t count, uint32_t seed) {
  const size_t elem = data == ncclBfloat16 ? 2 : 4;
  const uint64_t bytes = reduce::wireBytes(w, count);
  Values values(seed);
  std::vector<float> local(count), sent(count);
  values.fill(local.data(), count);
  values.fill(sent.data(), count);
  // The local operand in the data type; a received message: a valid one, or
  // (one seed in four) random bytes.
  const std::vector<uint8_t> src = operandBytes(local, data);
  std::vector<uint8_t> in(bytes);
  if (seed % 4 == 0) {
    for (auto& b : in) b = uint8_t(values.next());
  } else {
    in = portableMessage(w, sent);
  }

  for (const Variant& var : variants()) {
    for (const reduce::RedOp& op : ops()) {
      for (int share = 0; share < 2; ++share) {
        for (int prepost = 0; prepost < 4; ++prepost) {
          SCOPED_TRACE(testing::Message() << reduce::wireTypeName(w) << " data " << elem * 8 << " bits count " << count
                                          << " in " << var.in << " out " << var.out << " src " << var.src << " dst "
                                          << var.dst << " round " << var.round << " inPlace " << var.inPlace
                                          << " op " << int(op.kind) << " share " << share << " pre/post " << prepost);
          std::vector<uint8_t> outA(bytes, 0xa5), outB(bytes, 0xa5), outC(bytes, 0xa5);
          std::vector<uint8_t> dstA(count * elem, 0x5a), dstB(count * elem, 0x5a), dstC(count * elem, 0x5a);
          std::vector<uint8_t> srcA = src, srcB = src, srcC = src;
          auto piece = [&](std::vector<uint8_t>& out, std::vector<uint8_t>& dst, std::vector<uint8_t>& s) {
            WirePiece p;
            p.wire = w;
            p.data = data;
            p.op = op;
            p.pre = prepost & 1;
            p.post = prepost & 2;
            p.round = var.round;
            p.in = var.in ? in.data() : nullptr;
            p.out = var.out ? out.data() : nullptr;
            p.src = var.src ? s.data() : nullptr;
            p.dst = var.inPlace ? s.data() : var.dst ? dst.data() : nullptr;
            p.count = count;
            if (share == 1) {  // one thread's share of three
              p.firstGroup = 1;
              p.stride = 3;
            }
            return p;
          };
          runPortable(piece(outA, dstA, srcA));
          reduce::runWirePieceOnHost(piece(outB, dstB, srcB));
          if (var.out) {
            ASSERT_TRUE(sameMessages(w, count, outA, outB)) << "the message";
          }
          ASSERT_TRUE(sameValues(data, dstA, dstB)) << "the stored values";
          ASSERT_TRUE(sameValues(data, srcA, srcB)) << "the stored values (in place)";
          runBlockShape(piece(outC, dstC, srcC));
          if (var.out) {
            ASSERT_TRUE(sameMessages(w, count, outA, outC)) << "the message (a block's loops)";
          }
          ASSERT_TRUE(sameValues(data, dstA, dstC)) << "the stored values (a block's loops)";
          ASSERT_TRUE(sameValues(data, srcA, srcC)) << "the stored values in place (a block's loops)";
        }
      }
    }
  }
}

const WireType kWires[] = {WireType::BFloat16, WireType::Float16, WireType::Fp8E4M3, WireType::Fp8E5M2};

TEST(WireCodecsAvx2, PiecesMatchThePortableLoops) {
  BRAID_PIECES_NEED_GPU();
  uint32_t seed = 0;
  for (WireType w : kWires) {
    for (uint64_t count : {1ull, 31ull, 32ull, 33ull, 1000ull, 4099ull}) {
      for (int k = 0; k < 4; ++k) expectPiecesAgree(w, ncclFloat32, count, seed++);
      if (w == WireType::Fp8E4M3 || w == WireType::Fp8E5M2) {
        for (int k = 0; k < 4; ++k) expectPiecesAgree(w, ncclBfloat16, count, seed++);
      }
      if (HasFatalFailure()) return;
    }
  }
}

// A FIFO slot's size and more (131073 = 4096 groups and one value), fewer
// variants: receive-reduce-send with the owner's rounding, send, receive.
TEST(WireCodecsAvx2, LargePiecesMatchThePortableLoops) {
  BRAID_PIECES_NEED_GPU();
  constexpr uint64_t count = 131073;
  for (WireType w : kWires) {
    for (ncclDataType_t data : {ncclFloat32, ncclBfloat16}) {
      if (data == ncclBfloat16 && w != WireType::Fp8E4M3 && w != WireType::Fp8E5M2) continue;
      SCOPED_TRACE(testing::Message() << reduce::wireTypeName(w) << " data " << int(data));
      Values values(uint32_t(w) * 7 + uint32_t(data));
      std::vector<float> local(count), sent(count);
      values.fill(local.data(), count);
      values.fill(sent.data(), count);
      const std::vector<uint8_t> src = operandBytes(local, data);
      const std::vector<uint8_t> in = portableMessage(w, sent);
      for (int kind = 0; kind < 3; ++kind) {
        std::vector<uint8_t> outA(in.size()), outB(in.size()), dstA(src.size()), dstB(src.size());
        auto piece = [&](std::vector<uint8_t>& out, std::vector<uint8_t>& dst) {
          WirePiece p;
          p.wire = w;
          p.data = data;
          p.in = kind != 1 ? in.data() : nullptr;
          p.src = kind != 2 ? src.data() : nullptr;
          p.out = kind != 2 ? out.data() : nullptr;
          p.dst = kind != 1 ? dst.data() : nullptr;
          p.round = kind == 0;
          p.count = count;
          return p;
        };
        runPortable(piece(outA, dstA));
        reduce::runWirePieceOnHost(piece(outB, dstB));
        if (kind != 2) {
          ASSERT_TRUE(sameMessages(w, count, outA, outB)) << "kind " << kind;
        }
        ASSERT_TRUE(sameValues(data, dstA, dstB)) << "kind " << kind;
        std::vector<uint8_t> outC(in.size()), dstC(src.size());
        runBlockShape(piece(outC, dstC));
        if (kind != 2) {
          ASSERT_TRUE(sameMessages(w, count, outA, outC)) << "kind " << kind << " (a block's loops)";
        }
        ASSERT_TRUE(sameValues(data, dstA, dstC)) << "kind " << kind << " (a block's loops)";
      }
    }
  }
}

// The edges of the AVX2 fp8 codecs' paths, not left to chance: groups whose
// largest magnitude gives exactly the shifts around -126 (below it the scale
// is not a normal float and the scalar path multiplies twice), the clamp at
// -128 (largest magnitude a float subnormal), and the fast path's end at 100.
// Each group's sums land on that shift (the received message is zero) or
// near it; every step shape that codes a group is compared with the
// portable loops, bit for bit.
TEST(WireCodecsAvx2, ScalesAtTheEdgesOfTheFastPath) {
  const std::pair<WireType, float> formats[] = {{WireType::Fp8E4M3, 448.0f}, {WireType::Fp8E5M2, 57344.0f}};
  std::vector<int> shifts;
  for (int s = -131; s <= -121; ++s) shifts.push_back(s);
  for (int s : {-150, -140, -135, 0, 98, 99, 100, 101, 102}) shifts.push_back(s);
  std::mt19937 rng(7);
  for (const auto& [w, maxFinite] : formats) {
    std::vector<float> local, sent;
    for (int s : shifts) {
      const float m = std::ldexp(maxFinite, s);
      for (int above = 0; above < 2; ++above) {
        for (int withSent = 0; withSent < 2; ++withSent) {
          for (uint32_t j = 0; j < kWireGroup; ++j) {
            const float largest = above ? std::nextafter(m, 1e38f) : m;
            const float r = float(int32_t(rng() % 2001) - 1000) / 1000.0f;
            local.push_back(j == 5 ? -largest : largest * r);
            sent.push_back(withSent ? largest * float(int32_t(rng() % 101) - 50) / 100.0f : 0.0f);
          }
        }
      }
    }
    const uint64_t count = local.size();
    const std::vector<uint8_t> in = portableMessage(w, sent);
    reduce::RedOp preMul;
    preMul.kind = reduce::RedKind::PreMulSum;
    const float scalar = 0.75f;
    std::memcpy(preMul.scalar, &scalar, sizeof scalar);
    for (const reduce::RedOp& op : {reduce::RedOp(), preMul}) {
      for (const Variant& var : variants()) {
        SCOPED_TRACE(testing::Message() << reduce::wireTypeName(w) << " op " << int(op.kind) << " in " << var.in
                                        << " out " << var.out << " src " << var.src << " dst " << var.dst << " round "
                                        << var.round << " inPlace " << var.inPlace);
        std::vector<uint8_t> outA(in.size(), 0xa5), outB(in.size(), 0xa5);
        std::vector<float> dstA(count, 7.0f), dstB(count, 7.0f), srcA = local, srcB = local;
        auto piece = [&](std::vector<uint8_t>& out, std::vector<float>& dst, std::vector<float>& src) {
          WirePiece p;
          p.wire = w;
          p.op = op;
          p.pre = true;
          p.round = var.round;
          p.in = var.in ? in.data() : nullptr;
          p.out = var.out ? out.data() : nullptr;
          p.src = var.src ? src.data() : nullptr;
          p.dst = var.inPlace ? src.data() : var.dst ? dst.data() : nullptr;
          p.count = count;
          return p;
        };
        runPortable(piece(outA, dstA, srcA));
        reduce::runWirePieceOnHost(piece(outB, dstB, srcB));
        ASSERT_EQ(outA, outB) << "the message";
        ASSERT_EQ(0, std::memcmp(dstA.data(), dstB.data(), count * 4)) << "the stored values";
        ASSERT_EQ(0, std::memcmp(srcA.data(), srcB.data(), count * 4)) << "the stored values (in place)";
      }
    }
  }
}

}  // namespace
}  // namespace braid
