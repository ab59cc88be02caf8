// The arithmetic of one step, spread over a lane's threads: the same choice
// of functor as src/reduce/host_reduce.cc (copyTyped, reduceTyped) makes for
// a RedOp, evaluated with src/reduce/reduce_ops.h's element functors, so the
// bits agree with the host executor's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "reduce/host_reduce.h"
#include "reduce/reduce_ops.h"

namespace braid {
namespace exec {

// PreMulSum's scalar, stored in T's representation in op.scalar.
template <class T>
BRAID_HD BRAID_INLINE reduce::ScaleFn<T> scaleOf(const RedOp& op) {
  T s;
  unsigned char* p = reinterpret_cast<unsigned char*>(&s);
  for (size_t i = 0; i < sizeof(T); ++i) p[i] = op.scalar[i];
  return reduce::ScaleFn<T>{reduce::Traits<T>::load(s)};
}

// Each thread owns elements tid, tid+size, ...: an element is read and
// written by one thread, so dst may alias a source.
template <class T, class G, class F>
BRAID_HD void forEach2(const G& g, T* d, const T* a, const T* b, uint64_t n, F f) {
  for (uint64_t i = g.tid(); i < n; i += g.size()) d[i] = f(a[i], b[i]);
}
template <class T, class G, class F>
BRAID_HD void forEach1(const G& g, T* d, const T* s, uint64_t n, F f) {
  for (uint64_t i = g.tid(); i < n; i += g.size()) d[i] = f(s[i]);
}

template <class T, class G>
BRAID_HD void copyElems(const G& g, T* d, const T* s, uint64_t n) {
  for (uint64_t i = g.tid(); i < n; i += g.size()) d[i] = s[i];
}

// dst = post(pre(src)); as hostCopy.
template <class T, class G>
BRAID_HD void applyCopy(const G& g, const RedOp& op, T* d, const T* s, uint64_t n, bool pre, bool post) {
  if (pre && op.kind == RedKind::PreMulSum) {
    forEach1(g, d, s, n, scaleOf<T>(op));
  } else if (post && op.kind == RedKind::SumPostDiv) {
    forEach1(g, d, s, n, reduce::DivFn<T>{op.divisor});
  } else if (d != s) {
    copyElems(g, d, s, n);
  }
}

// dst = post(a OP pre(b)); as hostReduce: `a` is the received partial, `b`
// local data (a contribution when `pre`). PreMulSum without `pre` and
// SumPostDiv without `post` reduce as Sum.
template <class T, class G>
BRAID_HD void applyReduce(const G& g, const RedOp& op, T* d, const T* a, const T* b, uint64_t n, bool pre,
                          bool post) {
  switch (op.kind) {
    case RedKind::Prod: return forEach2(g, d, a, b, n, reduce::ProdFn<T>());
    case RedKind::Max: return forEach2(g, d, a, b, n, reduce::MaxFn<T>());
    case RedKind::Min: return forEach2(g, d, a, b, n, reduce::MinFn<T>());
    case RedKind::PreMulSum:
      if (pre) return forEach2(g, d, a, b, n, reduce::PreMulSumFn<T>{scaleOf<T>(op)});
      break;
    case RedKind::SumPostDiv:
      if (post) return forEach2(g, d, a, b, n, reduce::SumPostDivFn<T>{{op.divisor}});
      break;
    case RedKind::Sum: break;
  }
  forEach2(g, d, a, b, n, reduce::SumFn<T>());
}

}  // namespace exec
}  // namespace braid
