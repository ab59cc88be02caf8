// The arithmetic of one step, spread over a lane's threads, with the functor
// src/reduce/op_dispatch.h chooses for the host loops too, so the bits agree
// with theirs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "reduce/op_dispatch.h"

namespace braid::executor {

// Memory moves 16 bytes per access where it can (a GPU moves 128-bit loads
// and stores at full bandwidth, 32-bit ones at a fraction of it): each thread
// owns whole 16-byte vectors, then the elements of no whole vector one each. An element is
// still read and written by one thread only, so dst may be a source (in
// place). The arithmetic per element is the functor's, so the bits are those
// of an element-by-element loop.
// One vector per thread and round: more would hold more loads in flight, but
// every (datatype, functor) pair of the kernel instantiates these loops, and
// four per round made ptxas take minutes and gigabytes.
#if defined(__CUDA_ARCH__)
#define BRAID_UNROLL _Pragma("unroll")
#else
#define BRAID_UNROLL
#endif
constexpr uint64_t kVecBytes = 16;

struct alignas(16) Vec16 {
  uint64_t lo, hi;
};

BRAID_HD BRAID_INLINE Vec16 loadVec(const void* p) {
#if defined(__CUDA_ARCH__)
  // One ld.global.cg.v4.u32: cached in L2 only, which every SM and the
  // peers' writes reach (a FIFO slot is rewritten by another block or GPU).
  const uint4 v = __ldcg(static_cast<const uint4*>(p));
  Vec16 r;
  r.lo = uint64_t(v.x) | (uint64_t(v.y) << 32);
  r.hi = uint64_t(v.z) | (uint64_t(v.w) << 32);
  return r;
#else
  Vec16 r;
  memcpy(&r, p, sizeof r);
  return r;
#endif
}

BRAID_HD BRAID_INLINE void storeVec(void* p, const Vec16& v) {
#if defined(__CUDA_ARCH__)
  __stcg(static_cast<uint4*>(p), make_uint4(uint32_t(v.lo), uint32_t(v.lo >> 32), uint32_t(v.hi), uint32_t(v.hi >> 32)));
#else
  memcpy(p, &v, sizeof v);
#endif
}

// The elements of one vector, through a copy (no type punning of the vector).
template <class T>
struct VecElems {
  static constexpr uint32_t kCount = uint32_t(kVecBytes / sizeof(T));
  T e[kCount];
};
template <class T>
BRAID_HD BRAID_INLINE VecElems<T> elemsOf(const Vec16& v) {
  VecElems<T> r;
  memcpy(&r, &v, sizeof v);
  return r;
}
template <class T>
BRAID_HD BRAID_INLINE Vec16 vecOf(const VecElems<T>& e) {
  Vec16 v;
  memcpy(&v, &e, sizeof v);
  return v;
}

// How many leading elements to take one by one so that every pointer is at a
// 16-byte boundary; -1 when their misalignments differ (no vector path).
BRAID_HD BRAID_INLINE int64_t vectorHead(const void* d, const void* a, const void* b, uint64_t elemSize) {
  const uint64_t m = reinterpret_cast<uintptr_t>(d) % kVecBytes;
  if (reinterpret_cast<uintptr_t>(a) % kVecBytes != m || reinterpret_cast<uintptr_t>(b) % kVecBytes != m ||
      m % elemSize != 0)
    return -1;
  return int64_t(((kVecBytes - m) % kVecBytes) / elemSize);
}

// d[i] = f(a[i], b[i]) over nvec whole vectors (every pointer 16-byte aligned).
template <class T, class G, class F>
BRAID_HD void vectors2(const G& g, T* d, const T* a, const T* b, uint64_t nvec, F f) {
  constexpr uint32_t k = VecElems<T>::kCount;
  for (uint64_t v = g.tid(); v < nvec; v += g.size()) {
    VecElems<T> x = elemsOf<T>(loadVec(a + v * k));
    const VecElems<T> y = elemsOf<T>(loadVec(b + v * k));
    BRAID_UNROLL
    for (uint32_t j = 0; j < k; ++j) x.e[j] = f(x.e[j], y.e[j]);
    storeVec(d + v * k, vecOf<T>(x));
  }
}

// Each thread owns elements tid, tid+size, ... of what no vector covers.
template <class T, class G, class F>
BRAID_HD void scalars2(const G& g, T* d, const T* a, const T* b, uint64_t from, uint64_t to, F f) {
  for (uint64_t i = from + g.tid(); i < to; i += g.size()) d[i] = f(a[i], b[i]);
}

template <class T, class G, class F>
BRAID_HD void forEach2(const G& g, T* d, const T* a, const T* b, uint64_t n, F f) {
#if !defined(__CUDA_ARCH__)
  // One host thread: the plain loop, which the compiler vectorises itself.
  if (g.size() == 1) return scalars2(g, d, a, b, 0, n, f);
#endif
  const int64_t head = sizeof(T) <= kVecBytes ? vectorHead(d, a, b, sizeof(T)) : -1;
  if (head < 0 || uint64_t(head) >= n) return scalars2(g, d, a, b, 0, n, f);
  constexpr uint64_t k = kVecBytes / sizeof(T);
  const uint64_t nvec = (n - uint64_t(head)) / k;
  scalars2(g, d, a, b, 0, uint64_t(head), f);
  vectors2(g, d + head, a + head, b + head, nvec, f);
  scalars2(g, d, a, b, uint64_t(head) + nvec * k, n, f);
}

// The one-source forms (copies, scalings): one load per vector.
template <class T, class G, class F>
BRAID_HD void vectors1(const G& g, T* d, const T* s, uint64_t nvec, F f) {
  constexpr uint32_t k = VecElems<T>::kCount;
  for (uint64_t v = g.tid(); v < nvec; v += g.size()) {
    VecElems<T> x = elemsOf<T>(loadVec(s + v * k));
    BRAID_UNROLL
    for (uint32_t j = 0; j < k; ++j) x.e[j] = f(x.e[j]);
    storeVec(d + v * k, vecOf<T>(x));
  }
}

template <class T, class G, class F>
BRAID_HD void scalars1(const G& g, T* d, const T* s, uint64_t from, uint64_t to, F f) {
  for (uint64_t i = from + g.tid(); i < to; i += g.size()) d[i] = f(s[i]);
}

template <class T, class G, class F>
BRAID_HD void forEach1(const G& g, T* d, const T* s, uint64_t n, F f) {
#if !defined(__CUDA_ARCH__)
  if (g.size() == 1) return scalars1(g, d, s, 0, n, f);
#endif
  const int64_t head = sizeof(T) <= kVecBytes ? vectorHead(d, s, s, sizeof(T)) : -1;
  if (head < 0 || uint64_t(head) >= n) return scalars1(g, d, s, 0, n, f);
  constexpr uint64_t k = kVecBytes / sizeof(T);
  const uint64_t nvec = (n - uint64_t(head)) / k;
  scalars1(g, d, s, 0, uint64_t(head), f);
  vectors1(g, d + head, s + head, nvec, f);
  scalars1(g, d, s, uint64_t(head) + nvec * k, n, f);
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
  forEach1(g, d, s, n, [](T x) { return x; });
}

// dst = post(pre(src)); as hostCopy.
template <class T, class G>
BRAID_HD void applyCopy(const G& g, const reduce::RedOp& op, T* d, const T* s, uint64_t n, bool pre, bool post) {
  reduce::withCopyFn<T>(
      op, pre, post, [&](auto fn) { forEach1(g, d, s, n, fn); },
      [&] {
        if (d != s) copyElems(g, d, s, n);
      });
}

// dst = post(a OP pre(b)); as hostReduce: `a` is the received partial, `b`
// local data (a contribution when `pre`).
template <class T, class G>
BRAID_HD void applyReduce(const G& g, const reduce::RedOp& op, T* d, const T* a, const T* b, uint64_t n, bool pre,
                          bool post) {
  reduce::withReduceFn<T>(op, pre, post, [&](auto fn) { forEach2(g, d, a, b, n, fn); });
}

// The reduction across ranks of a PeerReduce step: dst(j)[i] = last(
// combine(...combine(first(src(0)[i]), src(1)[i])..., src(nsrc-1)[i])) for
// every j < ndst, in one pass: every source element is read once and every
// destination element written once. srcAt(k) and dstAt(j) give the k-th
// source and j-th destination (the peers' buffers). An element is read and
// written by one thread, all its sources before any destination, so a
// destination may be a source (in place).
template <class T, class G, class SrcAt, class DstAt, class First, class Combine, class Last>
BRAID_HD void reduceAcross(const G& g, DstAt dstAt, uint32_t ndst, SrcAt srcAt, uint32_t nsrc, uint64_t n, First first,
                           Combine combine, Last last) {
#if !defined(__CUDA_ARCH__)
  if (g.size() == 1) {
    // One host thread: tiles small enough to stay in L1, each loop over a
    // tile a plain one the compiler vectorises.
    constexpr uint64_t kTile = 512;
    T acc[kTile];
    for (uint64_t at = 0; at < n; at += kTile) {
      const uint64_t m = n - at < kTile ? n - at : kTile;
      const T* s0 = srcAt(0) + at;
      for (uint64_t i = 0; i < m; ++i) acc[i] = first(s0[i]);
      for (uint32_t k = 1; k < nsrc; ++k) {
        const T* sk = srcAt(k) + at;
        for (uint64_t i = 0; i < m; ++i) acc[i] = combine(acc[i], sk[i]);
      }
      for (uint32_t j = 0; j < ndst; ++j) {
        T* d = dstAt(j) + at;
        for (uint64_t i = 0; i < m; ++i) d[i] = last(acc[i]);
      }
    }
    return;
  }
#endif
  auto one = [&](uint64_t i) {
    T x = first(srcAt(0)[i]);
    for (uint32_t k = 1; k < nsrc; ++k) x = combine(x, srcAt(k)[i]);
    x = last(x);
    for (uint32_t j = 0; j < ndst; ++j) dstAt(j)[i] = x;
  };
  // Vectors only where every buffer is misaligned alike.
  int64_t head = sizeof(T) <= kVecBytes ? vectorHead(dstAt(0), dstAt(0), dstAt(0), sizeof(T)) : -1;
  for (uint32_t k = 0; head >= 0 && k < nsrc; ++k)
    if (vectorHead(dstAt(0), srcAt(k), srcAt(k), sizeof(T)) != head) head = -1;
  for (uint32_t j = 1; head >= 0 && j < ndst; ++j)
    if (vectorHead(dstAt(0), dstAt(j), dstAt(j), sizeof(T)) != head) head = -1;
  if (head < 0 || uint64_t(head) >= n) {
    for (uint64_t i = g.tid(); i < n; i += g.size()) one(i);
    return;
  }
  constexpr uint32_t k = VecElems<T>::kCount;
  const uint64_t nvec = (n - uint64_t(head)) / k;
  for (uint64_t i = g.tid(); i < uint64_t(head); i += g.size()) one(i);
  for (uint64_t v = g.tid(); v < nvec; v += g.size()) {
    const uint64_t at = uint64_t(head) + v * k;
    VecElems<T> x = elemsOf<T>(loadVec(srcAt(0) + at));
    BRAID_UNROLL
    for (uint32_t e = 0; e < k; ++e) x.e[e] = first(x.e[e]);
    for (uint32_t s = 1; s < nsrc; ++s) {
      const VecElems<T> y = elemsOf<T>(loadVec(srcAt(s) + at));
      BRAID_UNROLL
      for (uint32_t e = 0; e < k; ++e) x.e[e] = combine(x.e[e], y.e[e]);
    }
    BRAID_UNROLL
    for (uint32_t e = 0; e < k; ++e) x.e[e] = last(x.e[e]);
    const Vec16 out = vecOf<T>(x);
    for (uint32_t j = 0; j < ndst; ++j) storeVec(dstAt(j) + at, out);
  }
  for (uint64_t i = uint64_t(head) + nvec * k + g.tid(); i < n; i += g.size()) one(i);
}

// A PeerReduce step's arithmetic: the sources are contributions when `pre`,
// the result finished (post) when `post`.
template <class T, class G, class SrcAt, class DstAt>
BRAID_HD void applyReduceAcross(const G& g, const reduce::RedOp& op, DstAt dstAt, uint32_t ndst, SrcAt srcAt,
                                uint32_t nsrc, uint64_t n, bool pre, bool post) {
  reduce::withReduceAcrossFns<T>(op, pre, post, [&](auto first, auto combine, auto last) {
    reduceAcross<T>(g, dstAt, ndst, srcAt, nsrc, n, first, combine, last);
  });
}

}  // namespace braid::executor
