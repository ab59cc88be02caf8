// Tests of the narrow float conversions (src/reduce/numeric.h) and of the host
// reductions (src/reduce/host_reduce.h) for every datatype and operator.
//
// References are computed differently from the implementation: narrow formats
// are decoded with ldexp from their definition and rounded by searching the
// table of all their values for the nearest one (ties to the even code); float16
// is also checked against the compiler's _Float16, and, when CUDA's headers are
// on the include path, fp8/bf16/fp16 against NVIDIA's own host conversions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reduce/host_reduce.h"
#include "reduce/host_reduce_fast.h"
#include "reduce/numeric.h"

// NVIDIA's conversion headers work in host-only g++ builds; braid's include path
// does not name the toolkit, so fall back to its standard location.
#if __has_include(<cuda_fp8.h>) && __has_include(<cuda_bf16.h>)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#define BRAID_TEST_HAVE_CUDA_FP 1
#elif __has_include("/usr/local/cuda/include/cuda_fp8.h")
#include "/usr/local/cuda/include/cuda_bf16.h"
#include "/usr/local/cuda/include/cuda_fp16.h"
#include "/usr/local/cuda/include/cuda_fp8.h"
#define BRAID_TEST_HAVE_CUDA_FP 1
#endif

namespace braid {
namespace {

// ---- reference narrow formats ------------------------------------------------

struct Spec {
  int e, m;
  bool satFinite;  // out-of-range -> +-max (fp8) instead of inf
  bool noInf;      // e4m3: all-ones exponent is finite except the NaN code
  int bits() const { return 1 + e + m; }
  int bias() const { return (1 << (e - 1)) - 1; }
  uint32_t absMask() const { return (1u << (e + m)) - 1; }
  uint32_t expOnes() const { return (1u << e) - 1; }
  bool isNaN(uint32_t c) const {
    const uint32_t a = c & absMask();
    if (noInf) return a == absMask();
    return (a >> m) == expOnes() && (a & ((1u << m) - 1)) != 0;
  }
  double decode(uint32_t c) const {
    if (isNaN(c)) return std::numeric_limits<double>::quiet_NaN();
    const bool neg = (c >> (e + m)) & 1;
    const uint32_t ex = (c >> m) & expOnes();
    const uint32_t man = c & ((1u << m) - 1);
    double v;
    if (!noInf && ex == expOnes()) {
      v = std::numeric_limits<double>::infinity();
    } else if (ex == 0) {
      v = std::ldexp(double(man), 1 - bias() - m);
    } else {
      v = std::ldexp(double((1u << m) | man), int(ex) - bias() - m);
    }
    return neg ? -v : v;
  }
  uint32_t maxFiniteCode() const { return noInf ? absMask() - 1 : (expOnes() << m) - 1; }
};

const Spec kHalfSpec{5, 10, false, false};
const Spec kBf16Spec{8, 7, false, false};
const Spec kE4M3Spec{4, 3, true, true};
const Spec kE5M2Spec{5, 2, true, false};

// Nearest-value rounding over the table of all magnitudes.
class RefRounder {
 public:
  explicit RefRounder(const Spec& s) : spec_(s) {
    for (uint32_t c = 0; c <= s.maxFiniteCode(); ++c) {
      codes_.push_back(c);
      values_.push_back(s.decode(c));
    }
    if (!s.satFinite) {
      // Infinity sits where the next binade would start; its code is even, so a
      // tie with the largest finite value (odd code) goes to infinity, as RNE does.
      codes_.push_back(s.expOnes() << s.m);
      values_.push_back(std::ldexp(1.0, int(s.expOnes()) - 1 - s.bias() + 1));
    }
  }

  // The code for v; NaN gives some NaN code.
  uint32_t round(double v) const {
    if (std::isnan(v)) return spec_.absMask();  // a NaN in every format used here
    const uint32_t sign = std::signbit(v) ? 1u << (spec_.e + spec_.m) : 0;
    const double a = std::fabs(v);
    const size_t hi = size_t(std::lower_bound(values_.begin(), values_.end(), a) - values_.begin());
    uint32_t code;
    if (hi == values_.size()) {
      code = codes_.back();
    } else if (hi == 0 || values_[hi] == a) {
      code = codes_[hi];
    } else {
      const double dlo = a - values_[hi - 1], dhi = values_[hi] - a;
      if (dlo < dhi) code = codes_[hi - 1];
      else if (dhi < dlo) code = codes_[hi];
      else code = (codes_[hi] & 1) ? codes_[hi - 1] : codes_[hi];
    }
    return sign | code;
  }

  const Spec& spec() const { return spec_; }

 private:
  Spec spec_;
  std::vector<uint32_t> codes_;
  std::vector<double> values_;
};

const RefRounder& rounderFor(const Spec& s) {
  static const RefRounder half(kHalfSpec), bf16(kBf16Spec), e4m3(kE4M3Spec), e5m2(kE5M2Spec);
  if (s.m == 10) return half;
  if (s.m == 7) return bf16;
  if (s.m == 3) return e4m3;
  return e5m2;
}

uint32_t implFromFloat(const Spec& s, float f) {
  if (s.m == 10) return reduce::toHalf(f).bits;
  if (s.m == 7) return reduce::toBFloat16(f).bits;
  if (s.m == 3) return reduce::toFp8E4M3(f).bits;
  return reduce::toFp8E5M2(f).bits;
}

float implToFloat(const Spec& s, uint32_t c) {
  if (s.m == 10) return toFloat(reduce::Half{uint16_t(c)});
  if (s.m == 7) return toFloat(reduce::BFloat16{uint16_t(c)});
  if (s.m == 3) return toFloat(reduce::Fp8E4M3{uint8_t(c)});
  return toFloat(reduce::Fp8E5M2{uint8_t(c)});
}

float floatFromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint32_t bitsOfFloat(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Reference conversion from float: NaN stays NaN; for saturating formats an
// infinite input becomes +-max (NVIDIA's __NV_SATFINITE).
uint32_t refFromFloat(const Spec& s, float f) { return rounderFor(s).round(double(f)); }

// Floats that probe rounding: every value, every midpoint between neighbours,
// and the floats just either side of each midpoint, both signs; specials; and
// random bit patterns.
std::vector<float> probeFloats(const Spec& s, size_t randomCount) {
  std::vector<float> out;
  const uint32_t top = s.maxFiniteCode();
  for (uint32_t c = 0; c <= top; ++c) {
    const double lo = s.decode(c);
    // Past the largest value, the next would-be value is one ulp further: its
    // midpoint is where overflow (or saturation) starts.
    const double hi = c < top ? s.decode(c + 1) : lo + (lo - s.decode(c - 1));
    const float mid = float((lo + hi) / 2);  // exact: float is wider than every format
    for (float v : {float(lo), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f),
                    float(lo * 2)}) {
      out.push_back(v);
      out.push_back(-v);
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
                  floatFromBits(0x7f800001u), floatFromBits(0xffbfffffu)}) {
    out.push_back(v);
  }
  std::mt19937 rng(1234);
  for (size_t i = 0; i < randomCount; ++i) {
    uint32_t u = rng();
    // Half of them with an exponent near the format's range.
    if (i & 1) {
      const int spread = (1 << s.e) + 8;
      const int ex = 127 - s.bias() - s.m - 4 + int(rng() % uint32_t(spread + s.m + 8));
      u = (u & 0x807fffffu) | (uint32_t(std::clamp(ex, 1, 254)) << 23);
    }
    out.push_back(floatFromBits(u));
  }
  return out;
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", v);
  return buf;
}

void checkFormatAgainstReference(const Spec& s, size_t randomCount) {
  const uint32_t codes = 1u << s.bits();
  // Every pattern: decodes to the reference value and rounds back to itself.
  for (uint32_t c = 0; c < codes; ++c) {
    const float f = implToFloat(s, c);
    const double ref = s.decode(c);
    if (std::isnan(ref)) {
      ASSERT_TRUE(std::isnan(f)) << hex(c);
      ASSERT_TRUE(s.isNaN(implFromFloat(s, f))) << hex(c);
      continue;
    }
    ASSERT_EQ(double(f), ref) << hex(c);
    ASSERT_EQ(std::signbit(f), std::signbit(ref)) << hex(c);
    if (std::isinf(ref) && s.satFinite) {
      // e5m2 infinity is a valid input but converts back saturated to +-max.
      const uint32_t sign = c & ~s.absMask();
      ASSERT_EQ(implFromFloat(s, f), sign | s.maxFiniteCode()) << hex(c);
      continue;
    }
    ASSERT_EQ(implFromFloat(s, f), c) << "round trip of " << hex(c);
  }
  for (float f : probeFloats(s, randomCount)) {
    const uint32_t got = implFromFloat(s, f);
    const uint32_t want = refFromFloat(s, f);
    if (std::isnan(f)) {
      ASSERT_TRUE(s.isNaN(got)) << "NaN " << hex(bitsOfFloat(f)) << " -> " << hex(got);
      if (s.satFinite) {
        ASSERT_EQ(got, s.absMask()) << "fp8 NaN is canonical 0x7f";
      }
      continue;
    }
    ASSERT_EQ(got, want) << "float " << hex(bitsOfFloat(f)) << " (" << f << ")";
  }
}

TEST(Numeric, Float16MatchesReference) { checkFormatAgainstReference(kHalfSpec, 400000); }
TEST(Numeric, BFloat16MatchesReference) { checkFormatAgainstReference(kBf16Spec, 400000); }
TEST(Numeric, Fp8E4M3MatchesReference) { checkFormatAgainstReference(kE4M3Spec, 400000); }
TEST(Numeric, Fp8E5M2MatchesReference) { checkFormatAgainstReference(kE5M2Spec, 400000); }

TEST(Numeric, Fp8SaturationFacts) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(reduce::toFp8E4M3(448.0f).bits, 0x7e);
  EXPECT_EQ(reduce::toFp8E4M3(463.9f).bits, 0x7e);
  EXPECT_EQ(reduce::toFp8E4M3(464.0f).bits, 0x7e);  // tie with 480 (the NaN code) goes to even 448
  EXPECT_EQ(reduce::toFp8E4M3(1e6f).bits, 0x7e);
  EXPECT_EQ(reduce::toFp8E4M3(inf).bits, 0x7e);
  EXPECT_EQ(reduce::toFp8E4M3(-inf).bits, 0xfe);
  EXPECT_EQ(reduce::toFp8E5M2(57344.0f).bits, 0x7b);
  EXPECT_EQ(reduce::toFp8E5M2(61440.0f).bits, 0x7b);
  EXPECT_EQ(reduce::toFp8E5M2(inf).bits, 0x7b);
  EXPECT_EQ(reduce::toFp8E5M2(-inf).bits, 0xfb);
  EXPECT_EQ(reduce::toFp8E5M2(std::nanf("")).bits, 0x7f);
  EXPECT_EQ(reduce::toFp8E4M3(-std::nanf("")).bits, 0x7f);
  EXPECT_TRUE(std::isinf(toFloat(reduce::Fp8E5M2{0x7c})));  // e5m2 can still hold inf as input
  EXPECT_TRUE(std::isnan(toFloat(reduce::Fp8E4M3{0xff})));
  EXPECT_EQ(reduce::toHalf(65520.0f).bits, 0x7c00);  // float16 overflows to inf instead
  EXPECT_EQ(reduce::toHalf(65519.99f).bits, 0x7bff);
  EXPECT_EQ(reduce::toBFloat16(std::numeric_limits<float>::max()).bits, 0x7f80);
}

TEST(Numeric, Float16MatchesCompilerFloat16) {
  // All halves through the compiler's conversion, then a large random set of
  // floats (biased to the half range) including every midpoint.
  for (uint32_t c = 0; c < 65536; ++c) {
    _Float16 h;
    const uint16_t bits = uint16_t(c);
    std::memcpy(&h, &bits, sizeof h);
    const float want = float(h);
    const float got = toFloat(reduce::Half{bits});
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got));
    } else {
      ASSERT_EQ(bitsOfFloat(got), bitsOfFloat(want)) << hex(c);
    }
  }
  std::vector<float> probes = probeFloats(kHalfSpec, 2000000);
  for (float f : probes) {
    const _Float16 h = _Float16(f);
    uint16_t want;
    std::memcpy(&want, &h, sizeof want);
    const uint16_t got = reduce::toHalf(f).bits;
    if (std::isnan(f)) {
      ASSERT_TRUE(kHalfSpec.isNaN(got));
    } else {
      ASSERT_EQ(got, want) << "float " << hex(bitsOfFloat(f));
    }
  }
}

#ifdef BRAID_TEST_HAVE_CUDA_FP
TEST(Numeric, MatchesNvidiaHostConversions) {
  for (const Spec* s : {&kE4M3Spec, &kE5M2Spec, &kHalfSpec, &kBf16Spec}) {
    for (float f : probeFloats(*s, 200000)) {
      uint32_t want;
      if (s == &kE4M3Spec) {
        want = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
      } else if (s == &kE5M2Spec) {
        want = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2);
      } else if (s == &kHalfSpec) {
        want = __half_raw(__float2half_rn(f)).x;
      } else {
        want = __nv_bfloat16_raw(__float2bfloat16_rn(f)).x;
      }
      const uint32_t got = implFromFloat(*s, f);
      if (std::isnan(f)) {
        ASSERT_TRUE(s->isNaN(got));
        ASSERT_TRUE(s->isNaN(want));
        if (s->satFinite) {
          ASSERT_EQ(got, want);
        }
      } else {
        ASSERT_EQ(got, want) << "bits " << s->bits() << " float " << hex(bitsOfFloat(f));
      }
    }
  }
}
#endif

// ---- reductions -----------------------------------------------------------------

const ncclDataType_t kAllTypes[] = {ncclInt8,    ncclUint8,   ncclInt32,    ncclUint32,
                                    ncclInt64,   ncclUint64,  ncclFloat16,  ncclFloat32,
                                    ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

bool isSigned(ncclDataType_t t) { return t == ncclInt8 || t == ncclInt32 || t == ncclInt64; }

const Spec* specOf(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16: return &kHalfSpec;
    case ncclBfloat16: return &kBf16Spec;
    case ncclFloat8e4m3: return &kE4M3Spec;
    case ncclFloat8e5m2: return &kE5M2Spec;
    default: return nullptr;
  }
}

// One element, as the reference sees it.
struct Elt {
  double f = 0;    // floating types
  uint64_t i = 0;  // integer types: the value sign- or zero-extended to 64 bits
};

Elt load(ncclDataType_t t, const uint8_t* p) {
  Elt e;
  const size_t n = reduce::typeSize(t);
  if (reduce::isFloatingType(t)) {
    if (t == ncclFloat32) {
      float f;
      std::memcpy(&f, p, 4);
      e.f = f;
    } else if (t == ncclFloat64) {
      std::memcpy(&e.f, p, 8);
    } else {
      uint32_t c = 0;
      std::memcpy(&c, p, n);
      e.f = specOf(t)->decode(c);
    }
  } else {
    uint64_t u = 0;
    std::memcpy(&u, p, n);
    if (isSigned(t) && n < 8 && (u >> (8 * n - 1)) & 1) u |= ~uint64_t(0) << (8 * n);
    e.i = u;
  }
  return e;
}

// Stores v rounded (floating) or truncated (integer) to the type.
void store(ncclDataType_t t, Elt v, uint8_t* p) {
  const size_t n = reduce::typeSize(t);
  if (t == ncclFloat32) {
    const float f = float(v.f);  // one correct rounding from double
    std::memcpy(p, &f, 4);
  } else if (t == ncclFloat64) {
    std::memcpy(p, &v.f, 8);
  } else if (reduce::isFloatingType(t)) {
    const uint32_t c = rounderFor(*specOf(t)).round(v.f);
    std::memcpy(p, &c, n);
  } else {
    std::memcpy(p, &v.i, n);
  }
}

Elt roundTo(ncclDataType_t t, Elt v) {
  uint8_t buf[8];
  store(t, v, buf);
  return load(t, buf);
}

enum class Base { Sum, Prod, Max, Min };

Elt refCombine(ncclDataType_t t, Base op, Elt a, Elt b) {
  Elt r;
  const bool fl = reduce::isFloatingType(t);
  switch (op) {
    case Base::Sum:
      if (fl) r.f = a.f + b.f; else r.i = a.i + b.i;
      break;
    case Base::Prod:
      if (fl) r.f = a.f * b.f; else r.i = a.i * b.i;
      break;
    case Base::Max:
    case Base::Min: {
      const bool max = op == Base::Max;
      if (fl) {
        if (std::isnan(a.f)) r = b;
        else if (std::isnan(b.f)) r = a;
        else r = (max ? a.f < b.f : b.f < a.f) ? b : a;
      } else if (isSigned(t)) {
        const int64_t x = int64_t(a.i), y = int64_t(b.i);
        r = (max ? x < y : y < x) ? b : a;
      } else {
        r = (max ? a.i < b.i : b.i < a.i) ? b : a;
      }
      break;
    }
  }
  return roundTo(t, r);
}

Elt refDivide(ncclDataType_t t, Elt x, uint64_t n) {
  Elt r;
  if (isSigned(t)) r.i = uint64_t(int64_t(x.i) / int64_t(n));  // C++ truncates toward zero
  else r.i = x.i / n;
  return roundTo(t, r);
}

bool sameElt(ncclDataType_t t, const uint8_t* got, const uint8_t* want) {
  if (reduce::isFloatingType(t)) {
    const Elt g = load(t, got), w = load(t, want);
    if (std::isnan(w.f) || std::isnan(g.f)) return std::isnan(w.f) && std::isnan(g.f);
  }
  return std::memcmp(got, want, reduce::typeSize(t)) == 0;
}

std::string describe(ncclDataType_t t, const uint8_t* p) {
  const Elt e = load(t, p);
  return reduce::isFloatingType(t) ? std::to_string(e.f) : std::to_string(int64_t(e.i));
}

// Random data: integers over their whole range (so sums wrap), floats mostly in
// a modest range with a sprinkle of zeros, huge values, infinities and NaNs.
std::vector<uint8_t> randomData(ncclDataType_t t, size_t count, std::mt19937_64& rng) {
  const size_t n = reduce::typeSize(t);
  std::vector<uint8_t> out(count * n);
  for (size_t i = 0; i < count; ++i) {
    uint8_t* p = &out[i * n];
    const uint64_t r = rng();
    if (!reduce::isFloatingType(t)) {
      std::memcpy(p, &r, n);
      continue;
    }
    Elt e;
    const int pick = int(r % 64);
    const double mag = std::ldexp(double(rng() % 4096) / 64.0, int(rng() % 9) - 4);
    e.f = (r & 64) ? -mag : mag;
    if (pick == 0) e.f = 0;
    if (pick == 1) e.f = -0.0;
    if (pick == 2) e.f = std::numeric_limits<double>::infinity();
    if (pick == 3) e.f = std::numeric_limits<double>::quiet_NaN();
    if (pick == 4) e.f = 1e300;
    if (pick == 5 && specOf(t)) {  // any pattern of the narrow format
      std::memcpy(p, &r, n);
      continue;
    }
    store(t, e, p);
  }
  return out;
}

struct OpCase {
  ncclRedOp_t op;
  bool premul;  // use makePreMulSum with a random scalar instead of a built-in op
  const char* name;
};
const OpCase kOps[] = {{ncclSum, false, "sum"}, {ncclProd, false, "prod"}, {ncclMax, false, "max"},
                       {ncclMin, false, "min"}, {ncclAvg, false, "avg"},  {ncclSum, true, "premulsum"}};

// The reference of what a ring-style fold of `inputs` produces through
// hostCopy/hostReduce: acc = pre(x0); acc = acc + pre(xr); post at the end.
struct RefOp {
  ncclDataType_t type = ncclFloat32;
  Base base = Base::Sum;
  bool hasScalar = false;
  Elt scalar;
  uint64_t divisor = 0;  // 0: no post division
};

RefOp refOpFor(ncclDataType_t t, const OpCase& oc, int nranks, const uint8_t* premulScalar) {
  RefOp r;
  r.type = t;
  if (oc.premul) {
    r.hasScalar = true;
    r.scalar = load(t, premulScalar);
    return r;
  }
  switch (oc.op) {
    case ncclProd: r.base = Base::Prod; break;
    case ncclMax: r.base = Base::Max; break;
    case ncclMin: r.base = Base::Min; break;
    case ncclAvg:
      if (reduce::isFloatingType(t)) {
        r.hasScalar = true;
        Elt s;
        // NCCL: 1.0/n in double, narrowed to float first for all but float64.
        s.f = t == ncclFloat64 ? 1.0 / nranks : double(float(1.0 / nranks));
        r.scalar = roundTo(t, s);
      } else {
        r.divisor = uint64_t(nranks);
      }
      break;
    default: break;
  }
  return r;
}

Elt refPre(const RefOp& op, Elt x, bool contribution) {
  if (!op.hasScalar || !contribution) return x;
  return refCombine(op.type, Base::Prod, x, op.scalar);
}

Elt refPost(const RefOp& op, Elt x, bool final) {
  if (op.divisor == 0 || !final) return x;
  return refDivide(op.type, x, op.divisor);
}

reduce::RedOp implOpFor(ncclDataType_t t, const OpCase& oc, int nranks, const uint8_t* premulScalar) {
  return oc.premul ? reduce::makePreMulSum(t, premulScalar) : reduce::makeBuiltinOp(oc.op, t, nranks);
}

std::vector<uint8_t> randomScalar(ncclDataType_t t, std::mt19937_64& rng) {
  std::vector<uint8_t> s(8, 0);
  Elt e;
  if (reduce::isFloatingType(t)) {
    e.f = double(int(rng() % 13) - 6) / 4.0 + 0.1;  // not a power of two: rounding happens
  } else {
    e.i = uint64_t(int64_t(rng() % 11) - 5);
  }
  store(t, e, s.data());
  return s;
}

TEST(HostReduce, TypeTable) {
  const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  const char* names[] = {"int8",    "uint8",   "int32",    "uint32",     "int64",     "uint64",
                         "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"};
  for (int t = 0; t < 12; ++t) {
    EXPECT_EQ(reduce::typeSize(ncclDataType_t(t)), sizes[t]) << t;
    EXPECT_STREQ(reduce::typeName(ncclDataType_t(t)), names[t]);
    EXPECT_EQ(reduce::isFloatingType(ncclDataType_t(t)), t >= 6) << t;
  }
  EXPECT_EQ(reduce::typeSize(ncclDataType_t(12)), 0u);
  EXPECT_STREQ(reduce::typeName(ncclDataType_t(-1)), "invalid");
  EXPECT_FALSE(reduce::isFloatingType(ncclDataType_t(99)));
}

TEST(HostReduce, BuiltinOps) {
  EXPECT_EQ(reduce::makeBuiltinOp(ncclSum, ncclFloat32, 4).kind, reduce::RedKind::Sum);
  EXPECT_EQ(reduce::makeBuiltinOp(ncclProd, ncclInt8, 4).kind, reduce::RedKind::Prod);
  EXPECT_EQ(reduce::makeBuiltinOp(ncclMax, ncclUint64, 4).kind, reduce::RedKind::Max);
  EXPECT_EQ(reduce::makeBuiltinOp(ncclMin, ncclBfloat16, 4).kind, reduce::RedKind::Min);
  for (ncclDataType_t t : kAllTypes) {
    const reduce::RedOp op = reduce::makeBuiltinOp(ncclAvg, t, 3);
    EXPECT_EQ(op.type, t);
    if (reduce::isFloatingType(t)) {
      EXPECT_EQ(op.kind, reduce::RedKind::PreMulSum) << reduce::typeName(t);
      Elt s;
      s.f = t == ncclFloat64 ? 1.0 / 3 : double(float(1.0 / 3));
      uint8_t want[8] = {};
      store(t, s, want);
      EXPECT_EQ(std::memcmp(op.scalar, want, reduce::typeSize(t)), 0) << reduce::typeName(t);
    } else {
      EXPECT_EQ(op.kind, reduce::RedKind::SumPostDiv) << reduce::typeName(t);
      EXPECT_EQ(op.divisor, 3u);
    }
  }
  const double d = 2.5;
  const reduce::RedOp pm = reduce::makePreMulSum(ncclFloat64, &d);
  EXPECT_EQ(pm.kind, reduce::RedKind::PreMulSum);
  EXPECT_EQ(std::memcmp(pm.scalar, &d, 8), 0);
  const uint16_t h = 0x3c00;
  const reduce::RedOp pmh = reduce::makePreMulSum(ncclFloat16, &h);
  EXPECT_EQ(pmh.scalar[0], 0x00);
  EXPECT_EQ(pmh.scalar[1], 0x3c);
  EXPECT_EQ(pmh.scalar[2], 0x00);  // only typeSize bytes are read
}

// Folds nranks random inputs with hostCopy + hostReduce the way a reduction
// schedule does (accumulating in place), and compares with the reference.
void checkFold(ncclDataType_t t, const OpCase& oc, int nranks, size_t count, size_t offset,
               bool fast, std::mt19937_64& rng) {
  const size_t sz = reduce::typeSize(t);
  const std::vector<uint8_t> scalar = randomScalar(t, rng);
  const reduce::RedOp op = implOpFor(t, oc, nranks, scalar.data());
  const RefOp ref = refOpFor(t, oc, nranks, scalar.data());
  std::vector<std::vector<uint8_t>> in;
  for (int r = 0; r < nranks; ++r) in.push_back(randomData(t, count + offset, rng));

  std::vector<uint8_t> acc((count + offset) * sz);
  uint8_t* accp = acc.data() + offset * sz;
  reduce::hostCopyWith(op, accp, in[0].data() + offset * sz, count, true, nranks == 1, fast);
  for (int r = 1; r < nranks; ++r) {
    reduce::hostReduceWith(op, accp, accp, in[size_t(r)].data() + offset * sz, count, true,
                           r == nranks - 1, fast);
  }

  for (size_t i = 0; i < count; ++i) {
    const size_t at = (offset + i) * sz;
    Elt e = refPre(ref, load(t, &in[0][at]), true);
    for (int r = 1; r < nranks; ++r) {
      e = refCombine(t, ref.base, e, refPre(ref, load(t, &in[size_t(r)][at]), true));
    }
    e = refPost(ref, e, true);
    uint8_t want[8];
    store(t, e, want);
    ASSERT_TRUE(sameElt(t, accp + i * sz, want))
        << reduce::typeName(t) << " " << oc.name << " nranks " << nranks << " count " << count << " i " << i
        << (fast ? " fast paths" : " portable loops")
        << ": got " << describe(t, accp + i * sz) << " want " << describe(t, want);
  }
}

// `fast` false runs only the portable loops (numeric.h's conversions), true
// the dispatch hostReduce uses (F16C, AVX2, fp8 tables where available).
class HostReducePaths : public ::testing::TestWithParam<bool> {};

TEST_P(HostReducePaths, MatchesReferenceForAllTypesAndOps) {
  std::mt19937_64 rng(42);
  for (ncclDataType_t t : kAllTypes) {
    for (const OpCase& oc : kOps) {
      for (int nranks : {1, 2, 3, 4}) {
        for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1001)}) {
          checkFold(t, oc, nranks, count, count % 3, GetParam(), rng);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, HostReducePaths, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return std::string(p.param ? "Fast" : "Portable");
                         });

// One hostReduce with every flag combination and every aliasing pattern.
TEST_P(HostReducePaths, FlagsAndAliasing) {
  const bool fast = GetParam();
  auto hostReduce = [fast](const reduce::RedOp& op, void* dst, const void* a, const void* b, size_t n,
                           bool contribution, bool final) {
    reduce::hostReduceWith(op, dst, a, b, n, contribution, final, fast);
  };
  auto hostCopy = [fast](const reduce::RedOp& op, void* dst, const void* src, size_t n, bool contribution,
                         bool final) {
    reduce::hostCopyWith(op, dst, src, n, contribution, final, fast);
  };
  std::mt19937_64 rng(7);
  const size_t count = 1001;
  for (ncclDataType_t t : kAllTypes) {
    const size_t sz = reduce::typeSize(t);
    for (const OpCase& oc : kOps) {
      const std::vector<uint8_t> scalar = randomScalar(t, rng);
      const reduce::RedOp op = implOpFor(t, oc, 3, scalar.data());
      const RefOp ref = refOpFor(t, oc, 3, scalar.data());
      const std::vector<uint8_t> a = randomData(t, count, rng), b = randomData(t, count, rng);
      for (int flags = 0; flags < 4; ++flags) {
        const bool contrib = flags & 1, final = flags & 2;
        std::vector<uint8_t> want(count * sz), wantCopy(count * sz);
        for (size_t i = 0; i < count; ++i) {
          const Elt ea = load(t, &a[i * sz]), eb = load(t, &b[i * sz]);
          store(t, refPost(ref, refCombine(t, ref.base, ea, refPre(ref, eb, contrib)), final),
                &want[i * sz]);
          store(t, refPost(ref, refPre(ref, eb, contrib), final), &wantCopy[i * sz]);
        }
        auto expectAll = [&](const std::vector<uint8_t>& got, const std::vector<uint8_t>& w,
                             const char* how) {
          for (size_t i = 0; i < count; ++i) {
            ASSERT_TRUE(sameElt(t, &got[i * sz], &w[i * sz]))
                << reduce::typeName(t) << " " << oc.name << " contrib " << contrib << " final " << final
                << " " << how << " i " << i << ": got " << describe(t, &got[i * sz]) << " want "
                << describe(t, &w[i * sz]);
          }
        };
        std::vector<uint8_t> out(count * sz);
        hostReduce(op, out.data(), a.data(), b.data(), count, contrib, final);
        expectAll(out, want, "separate dst");
        std::vector<uint8_t> da = a;
        hostReduce(op, da.data(), da.data(), b.data(), count, contrib, final);
        expectAll(da, want, "dst==a");
        std::vector<uint8_t> db = b;
        hostReduce(op, db.data(), a.data(), db.data(), count, contrib, final);
        expectAll(db, want, "dst==b");

        std::vector<uint8_t> c(count * sz);
        hostCopy(op, c.data(), b.data(), count, contrib, final);
        expectAll(c, wantCopy, "copy");
        std::vector<uint8_t> cb = b;
        hostCopy(op, cb.data(), cb.data(), count, contrib, final);
        expectAll(cb, wantCopy, "copy in place");
        if (HasFatalFailure()) return;
      }
      // dst == a == b.
      std::vector<uint8_t> want(count * sz);
      for (size_t i = 0; i < count; ++i) {
        const Elt e = load(t, &a[i * sz]);
        store(t, refCombine(t, ref.base, e, refPre(ref, e, true)), &want[i * sz]);
      }
      std::vector<uint8_t> self = a;
      hostReduce(op, self.data(), self.data(), self.data(), count, true, false);
      for (size_t i = 0; i < count; ++i) {
        ASSERT_TRUE(sameElt(t, &self[i * sz], &want[i * sz])) << reduce::typeName(t) << " " << oc.name;
      }
    }
  }
}

TEST(HostReduce, PlainCopyIsExactForAllBytes) {
  // Neither flag: a copy, including NaN payloads and any bit pattern.
  std::vector<uint8_t> src(4096), dst(4096, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 131 + 7);
  for (ncclDataType_t t : kAllTypes) {
    std::fill(dst.begin(), dst.end(), 0);
    const size_t n = src.size() / reduce::typeSize(t);
    hostCopy(reduce::makeBuiltinOp(ncclAvg, t, 4), dst.data(), src.data(), n, false, false);
    EXPECT_EQ(dst, src) << reduce::typeName(t);
  }
  hostCopy(reduce::makeBuiltinOp(ncclSum, ncclFloat32, 2), nullptr, nullptr, 0, true, true);
  hostReduce(reduce::makeBuiltinOp(ncclSum, ncclFloat32, 2), nullptr, nullptr, nullptr, 0, true, true);
}

TEST(HostReduce, SignedIntegerSpecifics) {
  const int8_t a8[] = {-128, -5, 127, -1, 100, -7};
  const int8_t b8[] = {-1, -6, 1, -128, 100, 0};
  int8_t out8[6];
  hostReduce(reduce::makeBuiltinOp(ncclMax, ncclInt8, 2), out8, a8, b8, 6, true, true);
  EXPECT_EQ(std::vector<int>(out8, out8 + 6), (std::vector<int>{-1, -5, 127, -1, 100, 0}));
  hostReduce(reduce::makeBuiltinOp(ncclMin, ncclInt8, 2), out8, a8, b8, 6, true, true);
  EXPECT_EQ(std::vector<int>(out8, out8 + 6), (std::vector<int>{-128, -6, 1, -128, 100, -7}));
  hostReduce(reduce::makeBuiltinOp(ncclSum, ncclInt8, 2), out8, a8, b8, 6, true, true);
  EXPECT_EQ(std::vector<int>(out8, out8 + 6), (std::vector<int>{127, -11, -128, 127, -56, -7}));
  // Avg truncates toward zero, after the (wrapping) sum.
  const int32_t a32[] = {-7, 7, -1, 5, INT32_MIN};
  const int32_t b32[] = {0, 0, 0, 0, 0};
  int32_t out32[5];
  hostReduce(reduce::makeBuiltinOp(ncclAvg, ncclInt32, 2), out32, a32, b32, 5, true, true);
  EXPECT_EQ(std::vector<int32_t>(out32, out32 + 5),
            (std::vector<int32_t>{-3, 3, 0, 2, INT32_MIN / 2}));
  const int64_t a64[] = {INT64_MIN, -9, INT64_MAX};
  const int64_t b64[] = {-1, 0, 1};
  int64_t out64[3];
  hostReduce(reduce::makeBuiltinOp(ncclAvg, ncclInt64, 4), out64, a64, b64, 3, true, true);
  EXPECT_EQ(out64[0], INT64_MAX / 4);  // wrapped to INT64_MAX, then divided
  EXPECT_EQ(out64[1], -2);
  EXPECT_EQ(out64[2], INT64_MIN / 4);
  const uint8_t au[] = {255, 3};
  const uint8_t bu[] = {2, 0};
  uint8_t outu[2];
  hostReduce(reduce::makeBuiltinOp(ncclAvg, ncclUint8, 3), outu, au, bu, 2, true, true);
  EXPECT_EQ(outu[0], 0);  // 257 wraps to 1, 1/3 = 0
  EXPECT_EQ(outu[1], 1);
}

TEST(HostReduce, FloatMaxMinIgnoreNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float a[] = {nan, 1.0f, nan, -3.0f};
  const float b[] = {2.0f, nan, nan, -4.0f};
  float out[4];
  hostReduce(reduce::makeBuiltinOp(ncclMax, ncclFloat32, 2), out, a, b, 4, true, true);
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_TRUE(std::isnan(out[2]));
  EXPECT_EQ(out[3], -3.0f);
  hostReduce(reduce::makeBuiltinOp(ncclMin, ncclFloat32, 2), out, a, b, 4, true, true);
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 1.0f);
  EXPECT_EQ(out[3], -4.0f);
}

TEST(HostReduce, NarrowSumRoundsOncePerStep) {
  // 2048 + 1 in float16 is a tie that rounds to even (2048); 2050 + 1 to 2052.
  const reduce::Half a[] = {reduce::toHalf(2048.0f), reduce::toHalf(2050.0f)};
  const reduce::Half b[] = {reduce::toHalf(1.0f), reduce::toHalf(1.0f)};
  reduce::Half out[2];
  hostReduce(reduce::makeBuiltinOp(ncclSum, ncclFloat16, 2), out, a, b, 2, true, true);
  EXPECT_EQ(reduce::toFloat(out[0]), 2048.0f);
  EXPECT_EQ(reduce::toFloat(out[1]), 2052.0f);
  // fp8 e4m3 sums saturate instead of becoming NaN.
  const reduce::Fp8E4M3 c[] = {reduce::toFp8E4M3(448.0f)};
  reduce::Fp8E4M3 o8[1];
  hostReduce(reduce::makeBuiltinOp(ncclSum, ncclFloat8e4m3, 2), o8, c, c, 1, true, true);
  EXPECT_EQ(o8[0].bits, 0x7e);
}

}  // namespace
}  // namespace braid
