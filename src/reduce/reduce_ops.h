// Element-wise arithmetic of braid's reductions, per storage type: what one
// element of `a OP pre(b)` and `post(x)` is. Shared by the host loops in
// host_reduce.cc and, later, the device kernels, so everything is BRAID_HD.
//
// Semantics (those of NCCL):
//  - Integers wrap (computed on the unsigned type: no signed-overflow UB).
//  - float16, bfloat16 and fp8 are computed in float and rounded to the type
//    once per operation; PreMulSum's product is rounded before it is added.
//  - Max/Min ignore a NaN operand (fmax/fmin semantics, like CUDA's fmaxf and
//    __hmax); written as compares so that the loops vectorise.
//  - SumPostDiv divides integers truncating toward zero (signed types divide
//    the signed value).
// Floating-point code here must not be contracted into FMAs (braid builds with
// -std=c++17, where GCC's default is -ffp-contract=off): a fused pre-multiply
// and add would round once instead of twice and differ from the reference.
#pragma once

#include <cstdint>
#include <type_traits>

#include "reduce/numeric.h"

namespace braid::reduce {

// How a storage type is computed: Compute is the arithmetic type; load/store
// convert (identity for the native types).
template <class T>
struct Traits {
  using Compute = T;
  BRAID_HD BRAID_INLINE static T load(T v) { return v; }
  BRAID_HD BRAID_INLINE static T store(T v) { return v; }
};

template <class T>
struct NarrowTraits {
  using Compute = float;
  BRAID_HD BRAID_INLINE static float load(T v) { return toFloat(v); }
  BRAID_HD BRAID_INLINE static T store(float v) { return fromFloat<T>(v); }
};
template <>
struct Traits<Half> : NarrowTraits<Half> {};
template <>
struct Traits<BFloat16> : NarrowTraits<BFloat16> {};
template <>
struct Traits<Fp8E4M3> : NarrowTraits<Fp8E4M3> {};
template <>
struct Traits<Fp8E5M2> : NarrowTraits<Fp8E5M2> {};

template <class C>
BRAID_HD BRAID_INLINE C add(C a, C b) {
  if constexpr (std::is_integral<C>::value) {
    using U = typename std::make_unsigned<C>::type;
    return C(U(U(a) + U(b)));
  } else {
    return a + b;
  }
}

template <class C>
BRAID_HD BRAID_INLINE C mul(C a, C b) {
  if constexpr (std::is_integral<C>::value) {
    using U = typename std::make_unsigned<C>::type;
    // Widen narrow types to unsigned int so the product cannot hit signed int
    // overflow after integer promotion.
    using W = typename std::conditional<(sizeof(U) < sizeof(unsigned)), unsigned, U>::type;
    return C(U(W(U(a)) * W(U(b))));
  } else {
    return a * b;
  }
}

template <class C>
BRAID_HD BRAID_INLINE C maxOf(C a, C b) {
  if constexpr (std::is_integral<C>::value) {
    return a < b ? b : a;
  } else {
    return (a < b || a != a) ? b : a;  // a NaN `a` yields b; a NaN `b` yields a
  }
}

template <class C>
BRAID_HD BRAID_INLINE C minOf(C a, C b) {
  if constexpr (std::is_integral<C>::value) {
    return b < a ? b : a;
  } else {
    return (b < a || a != a) ? b : a;
  }
}

template <class C>
BRAID_HD BRAID_INLINE C divideBy(C x, uint64_t divisor) {
  if constexpr (std::is_integral<C>::value) {
    if constexpr (std::is_signed<C>::value) {
      // The divisor is a rank count, far below INT64_MAX; int64 division
      // truncates toward zero and cannot overflow for a positive divisor.
      return C(int64_t(x) / int64_t(divisor));
    } else {
      return C(uint64_t(x) / divisor);
    }
  } else {
    return x / C(divisor);
  }
}

// The operators. Each maps storage values to a storage value.
template <class T>
struct SumFn {
  using Tr = Traits<T>;
  BRAID_HD BRAID_INLINE T operator()(T a, T b) const { return Tr::store(add(Tr::load(a), Tr::load(b))); }
};

template <class T>
struct ProdFn {
  using Tr = Traits<T>;
  BRAID_HD BRAID_INLINE T operator()(T a, T b) const { return Tr::store(mul(Tr::load(a), Tr::load(b))); }
};

template <class T>
struct MaxFn {
  using Tr = Traits<T>;
  BRAID_HD BRAID_INLINE T operator()(T a, T b) const { return Tr::store(maxOf(Tr::load(a), Tr::load(b))); }
};

template <class T>
struct MinFn {
  using Tr = Traits<T>;
  BRAID_HD BRAID_INLINE T operator()(T a, T b) const { return Tr::store(minOf(Tr::load(a), Tr::load(b))); }
};

// pre(x) = x * scalar, rounded to T.
template <class T>
struct ScaleFn {
  using Tr = Traits<T>;
  typename Tr::Compute scalar;
  BRAID_HD BRAID_INLINE T operator()(T x) const { return Tr::store(mul(Tr::load(x), scalar)); }
};

// a + pre(b).
template <class T>
struct PreMulSumFn {
  using Tr = Traits<T>;
  ScaleFn<T> pre;
  BRAID_HD BRAID_INLINE T operator()(T a, T b) const { return Tr::store(add(Tr::load(a), Tr::load(pre(b)))); }
};

// post(x) = x / divisor.
template <class T>
struct DivFn {
  using Tr = Traits<T>;
  uint64_t divisor;
  BRAID_HD BRAID_INLINE T operator()(T x) const { return Tr::store(divideBy(Tr::load(x), divisor)); }
};

// post(a + b).
template <class T>
struct SumPostDivFn {
  DivFn<T> post;
  BRAID_HD BRAID_INLINE T operator()(T a, T b) const { return post(SumFn<T>()(a, b)); }
};

}  // namespace braid::reduce
