// The arithmetic of one step, spread over a lane's threads, with the functor
// src/reduce/op_dispatch.h chooses for the host loops too, so the bits agree
// with theirs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "reduce/op_dispatch.h"

namespace braid {
namespace exec {

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
#if !defined(__CUDA_ARCH__)
  // One host thread moves the whole step: libc's copy (no arithmetic, so the
  // bits are those of the loop below).
  if (g.size() == 1) {
    if (d != s && n != 0) memmove(d, s, n * sizeof(T));
    return;
  }
#endif
  for (uint64_t i = g.tid(); i < n; i += g.size()) d[i] = s[i];
}

// dst = post(pre(src)); as hostCopy.
template <class T, class G>
BRAID_HD void applyCopy(const G& g, const RedOp& op, T* d, const T* s, uint64_t n, bool pre, bool post) {
  reduce::withCopyFn<T>(
      op, pre, post, [&](auto fn) { forEach1(g, d, s, n, fn); },
      [&] {
        if (d != s) copyElems(g, d, s, n);
      });
}

// dst = post(a OP pre(b)); as hostReduce: `a` is the received partial, `b`
// local data (a contribution when `pre`).
template <class T, class G>
BRAID_HD void applyReduce(const G& g, const RedOp& op, T* d, const T* a, const T* b, uint64_t n, bool pre,
                          bool post) {
  reduce::withReduceFn<T>(op, pre, post, [&](auto fn) { forEach2(g, d, a, b, n, fn); });
}

}  // namespace exec
}  // namespace braid
