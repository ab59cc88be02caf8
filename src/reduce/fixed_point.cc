#include "reduce/fixed_point.h"

#include <algorithm>
#include <cmath>
#include <cstring>

// AVX2 copies of the loops, chosen at run time where the CPU has it (x86-64
// only; elsewhere the compiler's own vectorisation). Built with -O3
// (CMakeLists.txt): GCC's -O2 does not vectorise them.
#if defined(__x86_64__) && defined(__GNUC__)
#define BRAID_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#define BRAID_FIXED_AVX2 1
#include <immintrin.h>
#else
#define BRAID_AVX2_CLONES
#define BRAID_FIXED_AVX2 0
#endif

namespace braid::reduce::fixed {

namespace {

// One float32 to fixed point with integer operations only, written so that
// the loops around it vectorise: the rounding in 32-bit lanes (eight a
// vector), only the final shift, sign and mask in 64-bit ones; no branch, no
// shift of a constant (GCC does not vectorise 1 << n). value = m * 2^(e - 150)
// times 2^shift; a shift to the right by r rounds to nearest even: t = 2m >> r
// holds the kept bits and the rounding bit below them, and bits shifted out
// past that are not zero where t << r differs from 2m (r <= 26: m < 2^24
// rounds to 0 from r = 25). NaN and inf give 0. Checked against the FPU's
// rounding at every shift (tests/mp/reproducible_test.cc).
inline __attribute__((always_inline)) int64_t fixedOf(uint32_t w, int shift) {
  const uint32_t e = (w >> 23) & 0xff;
  const uint32_t normal = uint32_t(e != 0);
  const uint32_t m = (w & 0x7fffffu) | (normal << 23);
  const int32_t k = int32_t(e | (1 - normal)) - 150 + shift;  // a subnormal's exponent is 1's
  const uint32_t left = uint32_t(k > 0 ? k : 0);
  const uint32_t right = uint32_t(k < 0 ? (k > -26 ? -k : 26) : 0);
  const uint32_t twice = m << 1;
  const uint32_t t = twice >> right;
  const uint32_t q = t >> 1;
  const uint32_t up = t & (uint32_t(twice != (t << right)) | q) & 1;
  const uint64_t v = uint64_t(q + up) << left;
  const uint64_t negative = 0 - uint64_t(w >> 31);
  const uint64_t finite = 0 - uint64_t(e != 0xff);
  return int64_t(((v ^ negative) - negative) & finite);
}

// |s| < 2^51 to double, exactly: s plus the bits of M = 1.5 * 2^52 are the
// bits of M + s (its ulp is 1), so the double minus M is s. An integer add
// and a subtraction: loops of it vectorise (there is no int64 conversion
// before AVX-512).
constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
constexpr int64_t kMagicBits = 0x4338000000000000ll;
inline __attribute__((always_inline)) double int64ToDouble(int64_t s) {
  const int64_t b = s + kMagicBits;
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d - kMagic;
}

#if BRAID_FIXED_AVX2
// The same conversions in AVX2's double lanes, in a third of the
// instructions of the integer loops (which stay for other CPUs, and for a
// thread whose MXCSR rounds otherwise than to nearest or reads subnormal
// inputs as zero): x * 2^shift is exact in double (a float has 24 bits; no
// double result is subnormal); adding M = 1.5 * 2^52 rounds it to an
// integer, to nearest even, and leaves that integer in the low bits (|x| *
// 2^shift < 2^51). The same integers as fixedOf, bit for bit
// (tests/mp/reproducible_test.cc checks both against the FPU).
#define BRAID_AVX2_FN __attribute__((target("avx2")))

BRAID_AVX2_FN inline __m256i fixedOf4(__m128 x, __m256d scale) {
  const __m256d y = _mm256_add_pd(_mm256_mul_pd(_mm256_cvtps_pd(x), scale), _mm256_set1_pd(kMagic));
  const __m256i v = _mm256_sub_epi64(_mm256_castpd_si256(y), _mm256_set1_epi64x(kMagicBits));
  // NaN and inf give 0: only finite values are kept.
  const __m128 finite = _mm_cmp_ps(_mm_andnot_ps(_mm_set1_ps(-0.0f), x), _mm_set1_ps(INFINITY), _CMP_LT_OQ);
  return _mm256_and_si256(v, _mm256_cvtepi32_epi64(_mm_castps_si128(finite)));
}

// Eight values at a time, the rest by fixedOf; in = null: no addend.
BRAID_AVX2_FN void floatToFixedAvx2(const uint32_t* bits, size_t count, int shift, const int64_t* in,
                                    int64_t* out) {
  const __m256d scale = _mm256_set1_pd(std::ldexp(1.0, shift));
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256 x = _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + i)));
    __m256i a = fixedOf4(_mm256_castps256_ps128(x), scale);
    __m256i b = fixedOf4(_mm256_extractf128_ps(x, 1), scale);
    if (in) {
      a = _mm256_add_epi64(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
      b = _mm256_add_epi64(b, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 4)));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i + 4), b);
  }
  for (; i < count; ++i) out[i] = (in ? in[i] : 0) + fixedOf(bits[i], shift);
}

// Rounding to nearest (MXCSR.RC = 0) and no DAZ: the adds above round as
// fixedOf does and read subnormal floats as themselves.
bool avx2Conversions() {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  return avx2 && (_mm_getcsr() & 0x6040u) == 0;
}
#endif

BRAID_AVX2_CLONES void floatToFixedPortable(const uint32_t* bits, size_t count, int shift, int64_t* out) {
  for (size_t i = 0; i < count; ++i) out[i] = fixedOf(bits[i], shift);
}

BRAID_AVX2_CLONES void floatToFixedAddPortable(const uint32_t* bits, size_t count, int shift, const int64_t* in,
                                               int64_t* out) {
  for (size_t i = 0; i < count; ++i) out[i] = in[i] + fixedOf(bits[i], shift);
}

}  // namespace

void floatToFixed(const uint32_t* bits, size_t count, int shift, int64_t* out) {
#if BRAID_FIXED_AVX2
  if (avx2Conversions()) return floatToFixedAvx2(bits, count, shift, nullptr, out);
#endif
  floatToFixedPortable(bits, count, shift, out);
}

void floatToFixedAdd(const uint32_t* bits, size_t count, int shift, const int64_t* in, int64_t* out) {
#if BRAID_FIXED_AVX2
  if (avx2Conversions()) return floatToFixedAvx2(bits, count, shift, in, out);
#endif
  floatToFixedAddPortable(bits, count, shift, in, out);
}

BRAID_AVX2_CLONES void fixedToFloat(const int64_t* sums, size_t count, double unscale, float* out) {
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<float>(int64ToDouble(sums[i]) * unscale);
}

// One block of float32 words: the largest finite magnitude's bits, and
// whether any is inf or NaN (words from 0x7f800000 up, sign cleared).
// Separate loops of masks and unsigned maxima: that is what GCC vectorises.
BRAID_AVX2_CLONES uint32_t floatBlockScan(const uint32_t* bits, size_t count, uint32_t* special) {
  uint32_t largest = 0, any = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint32_t a = bits[i] & 0x7fffffffu;
    const uint32_t finite = a & (0u - uint32_t(a < 0x7f800000u));
    largest = finite > largest ? finite : largest;
  }
  for (size_t i = 0; i < count; ++i) any |= uint32_t((bits[i] & 0x7fffffffu) >= 0x7f800000u);
  *special = any;
  return largest;
}

double unscaleOf(int shift, int divisor) { return std::ldexp(1.0, -shift) / divisor; }

void runFixedPiece(const FixedPiece& p) {
  // Block by block (each has its own shift), through a block of int64 on the
  // stack where the step neither sends nor receives the integers whole.
  int64_t sums[kBlockElems];
  for (uint64_t i = 0; i < p.count;) {
    const uint64_t e = p.firstElem + i;
    const uint64_t block = e / kBlockElems;
    const uint64_t n = std::min<uint64_t>(p.count - i, (block + 1) * kBlockElems - e);
    const int shift = p.shifts[block];
    int64_t* acc = p.out ? p.out + i : sums;
    const uint32_t* bits = reinterpret_cast<const uint32_t*>(p.src + i);
    if (p.in) {
      floatToFixedAdd(bits, n, shift, p.in + i, acc);
    } else {
      floatToFixed(bits, n, shift, acc);
    }
    if (p.dst) fixedToFloat(acc, n, unscaleOf(shift, p.divisor), p.dst + i);
    i += n;
  }
}

}  // namespace braid::reduce::fixed
