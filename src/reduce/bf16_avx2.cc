// bfloat16 reductions built for AVX2 and chosen at run time. The portable
// loops vectorise with SSE2 too, but the conversions (shifts, compares and
// selects per element) run twice as fast with 8-lane AVX2; there is no
// bfloat16 conversion instruction before AVX-512 BF16 to do better.
#include <cstring>

#include "reduce/host_reduce_fast.h"
#include "reduce/reduce_ops.h"

namespace braid::reduce {

#if defined(__x86_64__) && defined(__GNUC__)

namespace {

#define BRAID_LOOP_ATTR __attribute__((target("avx2")))
#include "reduce/host_loops.inc"
#undef BRAID_LOOP_ATTR

bool haveAvx2() {
  static const bool have = __builtin_cpu_supports("avx2");
  return have;
}

ScaleFn<BFloat16> scaleOf(const RedOp& op) {
  BFloat16 s;
  std::memcpy(&s, op.scalar, sizeof s);
  return ScaleFn<BFloat16>{toFloat(s)};
}

}  // namespace

size_t reduceBf16Avx2(const RedOp& op, BFloat16* d, const BFloat16* a, const BFloat16* b,
                      size_t n, bool pre, bool post) {
  using T = BFloat16;
  if (!haveAvx2()) return 0;
  switch (op.kind) {
    case RedKind::Prod: binary(d, a, b, n, ProdFn<T>()); return n;
    case RedKind::Max: binary(d, a, b, n, MaxFn<T>()); return n;
    case RedKind::Min: binary(d, a, b, n, MinFn<T>()); return n;
    case RedKind::PreMulSum:
      if (pre) {
        binary(d, a, b, n, PreMulSumFn<T>{scaleOf(op)});
        return n;
      }
      break;
    case RedKind::SumPostDiv:
      if (post) {
        binary(d, a, b, n, SumPostDivFn<T>{{op.divisor}});
        return n;
      }
      break;
    case RedKind::Sum: break;
  }
  binary(d, a, b, n, SumFn<T>());
  return n;
}

size_t copyBf16Avx2(const RedOp& op, BFloat16* d, const BFloat16* s, size_t n, bool pre,
                    bool post) {
  if (!haveAvx2()) return 0;
  if (pre && op.kind == RedKind::PreMulSum) {
    unary(d, s, n, scaleOf(op));
    return n;
  }
  if (post && op.kind == RedKind::SumPostDiv) {
    unary(d, s, n, DivFn<BFloat16>{op.divisor});
    return n;
  }
  return 0;  // a plain copy: memcpy in the caller
}

#else  // not x86-64 with GCC/Clang

size_t reduceBf16Avx2(const RedOp&, BFloat16*, const BFloat16*, const BFloat16*, size_t, bool,
                      bool) {
  return 0;
}
size_t copyBf16Avx2(const RedOp&, BFloat16*, const BFloat16*, size_t, bool, bool) { return 0; }

#endif

}  // namespace braid::reduce
