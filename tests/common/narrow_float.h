// Reference conversions between double and the narrow float formats NCCL
// reduces (fp16, bf16, fp8 e4m3 "fn", fp8 e5m2). Written for the tests so that
// expected values never come from the library under test.
//
// All conversions from double round to nearest, ties to even, handle
// subnormals, and on overflow give infinity (fp16, bf16, e5m2) or saturate to
// the largest finite value (e4m3, which has no infinity).
#ifndef BRAID_TESTS_COMMON_NARROW_FLOAT_H_
#define BRAID_TESTS_COMMON_NARROW_FLOAT_H_

#include <cmath>
#include <cstdint>

namespace testfloat {

struct Format {
  int expBits;
  int mantBits;
  // e4m3fn: exponent field all ones is a normal binade; only S.1111.111 is NaN.
  bool ieeeSpecials;
};

constexpr Format kFp16{5, 10, true};
constexpr Format kBf16{8, 7, true};
constexpr Format kE4m3{4, 3, false};
constexpr Format kE5m2{5, 2, true};

constexpr int bias(Format f) { return (1 << (f.expBits - 1)) - 1; }

inline double decode(uint32_t bits, Format f) {
  const uint32_t mantMask = (1u << f.mantBits) - 1;
  const uint32_t expMask = (1u << f.expBits) - 1;
  const bool neg = (bits >> (f.expBits + f.mantBits)) & 1;
  const uint32_t e = (bits >> f.mantBits) & expMask;
  const uint32_t m = bits & mantMask;
  double v;
  if (f.ieeeSpecials && e == expMask) {
    v = m ? NAN : INFINITY;
  } else if (!f.ieeeSpecials && e == expMask && m == mantMask) {
    v = NAN;
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias(f) - f.mantBits);
  } else {
    v = std::ldexp(static_cast<double>(m | (1u << f.mantBits)),
                   static_cast<int>(e) - bias(f) - f.mantBits);
  }
  return neg ? -v : v;
}

inline double largestFinite(Format f) {
  const uint32_t expMask = (1u << f.expBits) - 1;
  const uint32_t mantMask = (1u << f.mantBits) - 1;
  const uint32_t bits = f.ieeeSpecials ? (((expMask - 1) << f.mantBits) | mantMask)
                                       : ((expMask << f.mantBits) | (mantMask - 1));
  return decode(bits, f);
}

// Round-half-even of a non-negative value to an integer.
inline double roundEven(double x) {
  double r = std::floor(x);
  const double diff = x - r;
  if (diff > 0.5 || (diff == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  return r;
}

inline uint32_t encode(double v, Format f) {
  const uint32_t signBit = 1u << (f.expBits + f.mantBits);
  const uint32_t expMask = (1u << f.expBits) - 1;
  const uint32_t mantMask = (1u << f.mantBits) - 1;
  if (std::isnan(v)) {
    return f.ieeeSpecials ? ((expMask << f.mantBits) | (1u << (f.mantBits - 1)))
                          : ((expMask << f.mantBits) | mantMask);
  }
  const uint32_t sign = std::signbit(v) ? signBit : 0;
  const double a = std::fabs(v);
  const uint32_t inf = f.ieeeSpecials ? (expMask << f.mantBits)
                                      : ((expMask << f.mantBits) | (mantMask - 1));
  if (std::isinf(a)) return sign | inf;
  if (a == 0.0) return sign;
  // The smallest normal exponent; below it the quantum is fixed (subnormals).
  const int minExp = 1 - bias(f);
  int e;
  std::frexp(a, &e);
  e -= 1;  // a = 1.xxx * 2^e
  if (e < minExp) e = minExp;
  const double quantum = std::ldexp(1.0, e - f.mantBits);
  double q = roundEven(a / quantum);
  if (q >= std::ldexp(1.0, f.mantBits + 1)) {  // rounding carried into the next binade
    q /= 2;
    e += 1;
  }
  if (q < std::ldexp(1.0, f.mantBits)) {  // subnormal (or rounded to zero)
    return sign | static_cast<uint32_t>(q);
  }
  // IEEE rule: overflow when the value rounded with an unbounded exponent
  // exceeds the largest finite one.
  if (std::ldexp(q, e - f.mantBits) > largestFinite(f)) {
    return sign | inf;  // e4m3: "inf" is the saturated largest finite value
  }
  const uint32_t field = static_cast<uint32_t>(e + bias(f));
  return sign | (field << f.mantBits) | (static_cast<uint32_t>(q) & mantMask);
}

// Round a double to the nearest value of format f (as a double).
inline double quantize(double v, Format f) { return decode(encode(v, f), f); }

inline double quantizeFloat(double v) { return static_cast<double>(static_cast<float>(v)); }

}  // namespace testfloat

#endif  // BRAID_TESTS_COMMON_NARROW_FLOAT_H_
