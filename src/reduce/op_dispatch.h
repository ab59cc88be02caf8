// Which element functor of reduce_ops.h a step applies for a RedOp: one
// choice for the host loops (host_reduce.cc) and the device plan interpreter
// (kernels/executor), so that both compute the same bits.
#pragma once

#include <cstddef>

#include "reduce/host_reduce.h"
#include "reduce/reduce_ops.h"

namespace braid::reduce {

// PreMulSum's scalar, stored in T's representation in op.scalar.
template <class T>
BRAID_HD BRAID_INLINE ScaleFn<T> scaleOf(const RedOp& op) {
  T s;
  unsigned char* p = reinterpret_cast<unsigned char*>(&s);
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = op.scalar[i];
  return ScaleFn<T>{Traits<T>::load(s)};
}

// `apply` may be a host-only callable (a kernel launcher): nvcc must not check
// the execution space of what these templates call.
#if defined(__CUDACC__)
#define BRAID_ANY_CALLABLE _Pragma("nv_exec_check_disable")
#else
#define BRAID_ANY_CALLABLE
#endif

// Returns apply(fn) for the binary functor of dst = post(a OP pre(b)): `a` is
// the received partial, `b` local data (a contribution when `pre`). PreMulSum
// without `pre` and SumPostDiv without `post` reduce as Sum.
BRAID_ANY_CALLABLE
template <class T, class Apply>
BRAID_HD BRAID_INLINE decltype(auto) withReduceFn(const RedOp& op, bool pre, bool post, Apply apply) {
  switch (op.kind) {
    case RedKind::Prod: return apply(ProdFn<T>());
    case RedKind::Max: return apply(MaxFn<T>());
    case RedKind::Min: return apply(MinFn<T>());
    case RedKind::PreMulSum:
      if (pre) return apply(PreMulSumFn<T>{scaleOf<T>(op)});
      break;
    case RedKind::SumPostDiv:
      if (post) return apply(SumPostDivFn<T>{{op.divisor}});
      break;
    case RedKind::Sum: break;
  }
  return apply(SumFn<T>());
}

// withReduceFn for the sums a wire type carries (engine/task_plan.cc
// wireTypeFor: Sum, PreMulSum, SumPostDiv): the wire loops are instantiated
// per codec, datatype and functor, and a block's build pays for each.
BRAID_ANY_CALLABLE
template <class T, class Apply>
BRAID_HD BRAID_INLINE decltype(auto) withSumFn(const RedOp& op, bool pre, bool post, Apply apply) {
  if (pre && op.kind == RedKind::PreMulSum) return apply(PreMulSumFn<T>{scaleOf<T>(op)});
  if (post && op.kind == RedKind::SumPostDiv) return apply(SumPostDivFn<T>{{op.divisor}});
  return apply(SumFn<T>());
}

// For dst = post(pre(src)): calls transform(fn) with the unary functor when
// the copy changes values, else copy() (a plain copy).
BRAID_ANY_CALLABLE
template <class T, class Transform, class Copy>
BRAID_HD BRAID_INLINE void withCopyFn(const RedOp& op, bool pre, bool post, Transform transform, Copy copy) {
  if (pre && op.kind == RedKind::PreMulSum) return transform(scaleOf<T>(op));
  if (post && op.kind == RedKind::SumPostDiv) return transform(DivFn<T>{op.divisor});
  copy();
}

// Whether withCopyFn(op, pre, post, ...) copies as is (no transform).
BRAID_HD BRAID_INLINE bool copiesAsIs(const RedOp& op, bool pre, bool post) {
  return !(pre && op.kind == RedKind::PreMulSum) && !(post && op.kind == RedKind::SumPostDiv);
}

// The identity, for reductions across ranks that change nothing at one end.
template <class T>
struct SameFn {
  BRAID_HD BRAID_INLINE T operator()(T x) const { return x; }
};

// For a reduction across several operands in one pass (x0 OP x1 OP ...):
// calls apply(first, combine, last), so that the result is
// last(combine(...combine(first(x0), x1)..., xm)), where first applies `pre` to
// the first operand and combine to each later one (both contributions when
// `pre`), and last is `post`. The same bits as a chain of withReduceFn steps
// that starts from pre(x0).
BRAID_ANY_CALLABLE
template <class T, class Apply>
BRAID_HD BRAID_INLINE void withReduceAcrossFns(const RedOp& op, bool pre, bool post, Apply apply) {
  switch (op.kind) {
    case RedKind::Prod: return apply(SameFn<T>(), ProdFn<T>(), SameFn<T>());
    case RedKind::Max: return apply(SameFn<T>(), MaxFn<T>(), SameFn<T>());
    case RedKind::Min: return apply(SameFn<T>(), MinFn<T>(), SameFn<T>());
    case RedKind::PreMulSum:
      if (pre) return apply(scaleOf<T>(op), PreMulSumFn<T>{scaleOf<T>(op)}, SameFn<T>());
      break;
    case RedKind::SumPostDiv:
      if (post) return apply(SameFn<T>(), SumFn<T>(), DivFn<T>{op.divisor});
      break;
    case RedKind::Sum: break;
  }
  apply(SameFn<T>(), SumFn<T>(), SameFn<T>());
}

}  // namespace braid::reduce
