// float16 reductions with the x86 F16C instructions (8 conversions per
// instruction). The portable conversions in numeric.h cost ~30 SSE2
// instructions per element, which left float16 far below memory bandwidth.
// F16C rounds to nearest even, overflows to infinity and handles subnormals
// exactly like numeric.h (the unit test compares both against a reference).
#include "reduce/host_reduce_fast.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include <cstring>

#define BRAID_F16C __attribute__((target("avx,f16c")))

namespace braid::reduce {
namespace {

bool haveF16C() {
  static const bool have = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return have;
}

BRAID_F16C inline __m256 load8(const Half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
BRAID_F16C inline __m128i round8(__m256 v) {
  return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
BRAID_F16C inline void store8(Half* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), round8(v));
}

// The same semantics as reduce_ops.h, eight floats at a time.
struct VSum {
  BRAID_F16C __m256 operator()(__m256 a, __m256 b) const { return _mm256_add_ps(a, b); }
};
struct VProd {
  BRAID_F16C __m256 operator()(__m256 a, __m256 b) const { return _mm256_mul_ps(a, b); }
};
struct VMax {  // (a < b || a is NaN) ? b : a
  BRAID_F16C __m256 operator()(__m256 a, __m256 b) const {
    const __m256 pickB = _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_LT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    return _mm256_blendv_ps(a, b, pickB);
  }
};
struct VMin {  // (b < a || a is NaN) ? b : a
  BRAID_F16C __m256 operator()(__m256 a, __m256 b) const {
    const __m256 pickB = _mm256_or_ps(_mm256_cmp_ps(b, a, _CMP_LT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
    return _mm256_blendv_ps(a, b, pickB);
  }
};
// pre(x) = x * scalar rounded to float16 (NCCL rounds the product before the sum).
// Holds a float, not an __m256, so that no vector crosses a call between code
// built for different targets.
struct VScale {
  float scalar;
  BRAID_F16C __m256 operator()(__m256 x) const {
    return _mm256_cvtph_ps(round8(_mm256_mul_ps(x, _mm256_set1_ps(scalar))));
  }
};
struct VPreMulSum {
  VScale pre;
  BRAID_F16C __m256 operator()(__m256 a, __m256 b) const { return _mm256_add_ps(a, pre(b)); }
};

// Loads of a block happen before its store, so dst may alias a or b exactly.
template <class F>
BRAID_F16C size_t binary8(Half* d, const Half* a, const Half* b, size_t n, F f) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 r0 = f(load8(a + i), load8(b + i));
    const __m256 r1 = f(load8(a + i + 8), load8(b + i + 8));
    store8(d + i, r0);
    store8(d + i + 8, r1);
  }
  for (; i + 8 <= n; i += 8) store8(d + i, f(load8(a + i), load8(b + i)));
  return i;
}

VScale scaleOf(const RedOp& op) {
  Half s;
  std::memcpy(&s, op.scalar, sizeof s);
  return VScale{toFloat(s)};
}

}  // namespace

size_t reduceHalfF16C(const RedOp& op, Half* dst, const Half* a, const Half* b, size_t count,
                      bool pre, bool post) {
  if (!haveF16C()) return 0;
  switch (op.kind) {
    case RedKind::Sum: return binary8(dst, a, b, count, VSum());
    case RedKind::Prod: return binary8(dst, a, b, count, VProd());
    case RedKind::Max: return binary8(dst, a, b, count, VMax());
    case RedKind::Min: return binary8(dst, a, b, count, VMin());
    case RedKind::PreMulSum:
      return pre ? binary8(dst, a, b, count, VPreMulSum{scaleOf(op)})
                 : binary8(dst, a, b, count, VSum());
    case RedKind::SumPostDiv:  // never built for float types; left to the portable loop
      return post ? 0 : binary8(dst, a, b, count, VSum());
  }
  return 0;
}

namespace {
BRAID_F16C size_t scale8(Half* d, const Half* s, size_t n, VScale f) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) store8(d + i, f(load8(s + i)));
  return i;
}
}  // namespace

size_t copyHalfF16C(const RedOp& op, Half* dst, const Half* src, size_t count, bool pre,
                    bool post) {
  // Only the scaling is worth it; plain copies are memcpy and division is not used.
  if (!haveF16C() || !pre || op.kind != RedKind::PreMulSum) return 0;
  return scale8(dst, src, count, scaleOf(op));
}

}  // namespace braid::reduce

#else  // not x86-64 with GCC/Clang: the portable loops do everything

namespace braid::reduce {
size_t reduceHalfF16C(const RedOp&, Half*, const Half*, const Half*, size_t, bool, bool) { return 0; }
size_t copyHalfF16C(const RedOp&, Half*, const Half*, size_t, bool, bool) { return 0; }
}  // namespace braid::reduce

#endif
