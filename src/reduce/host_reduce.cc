// Host reductions: dispatch on type and operator once, outside the loops, then
// run simple restrict-qualified element loops that g++ -O3 vectorises.
#include "reduce/host_reduce.h"

#include <cstring>

#include "reduce/host_reduce_fast.h"
#include "reduce/op_dispatch.h"
#include "reduce/reduce_ops.h"

namespace braid::reduce {

size_t typeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 0;
  }
}

const char* typeName(ncclDataType_t type) {
  switch (type) {
    case ncclInt8: return "int8";
    case ncclUint8: return "uint8";
    case ncclInt32: return "int32";
    case ncclUint32: return "uint32";
    case ncclInt64: return "int64";
    case ncclUint64: return "uint64";
    case ncclFloat16: return "float16";
    case ncclFloat32: return "float32";
    case ncclFloat64: return "float64";
    case ncclBfloat16: return "bfloat16";
    case ncclFloat8e4m3: return "float8e4m3";
    case ncclFloat8e5m2: return "float8e5m2";
    default: return "invalid";
  }
}

bool isFloatingType(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16:
    case ncclFloat32:
    case ncclFloat64:
    case ncclBfloat16:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return true;
    default:
      return false;
  }
}

namespace {

// Stores v in `type`'s representation into op.scalar. As NCCL does for
// ncclAvg, 1/n is computed in double, narrowed to float, then to the type.
void storeScalar(RedOp& op, double v) {
  const float f = float(v);
  switch (op.type) {
    case ncclFloat64: std::memcpy(op.scalar, &v, sizeof v); break;
    case ncclFloat32: std::memcpy(op.scalar, &f, sizeof f); break;
    case ncclFloat16: {
      const Half h = toHalf(f);
      std::memcpy(op.scalar, &h, sizeof h);
      break;
    }
    case ncclBfloat16: {
      const BFloat16 h = toBFloat16(f);
      std::memcpy(op.scalar, &h, sizeof h);
      break;
    }
    case ncclFloat8e4m3: op.scalar[0] = toFp8E4M3(f).bits; break;
    case ncclFloat8e5m2: op.scalar[0] = toFp8E5M2(f).bits; break;
    default: break;
  }
}

}  // namespace

RedOp makeBuiltinOp(ncclRedOp_t op, ncclDataType_t type, int nranks) {
  RedOp r;
  r.type = type;
  switch (op) {
    case ncclSum: r.kind = RedKind::Sum; break;
    case ncclProd: r.kind = RedKind::Prod; break;
    case ncclMax: r.kind = RedKind::Max; break;
    case ncclMin: r.kind = RedKind::Min; break;
    case ncclAvg: {
      const int n = nranks < 1 ? 1 : nranks;
      if (isFloatingType(type)) {
        r.kind = RedKind::PreMulSum;
        storeScalar(r, 1.0 / double(n));
      } else {
        r.kind = RedKind::SumPostDiv;
        r.divisor = uint64_t(n);
      }
      break;
    }
    default: r.kind = RedKind::Sum; break;  // callers validate ops before planning
  }
  return r;
}

RedOp makePreMulSum(ncclDataType_t type, const void* scalar) {
  RedOp r;
  r.kind = RedKind::PreMulSum;
  r.type = type;
  const size_t size = typeSize(type);
  if (scalar != nullptr && size <= sizeof r.scalar) std::memcpy(r.scalar, scalar, size);
  return r;
}

namespace {

#define BRAID_LOOP_ATTR
#include "reduce/host_loops.inc"
#undef BRAID_LOOP_ATTR

// Narrow types first go through their fast paths (host_reduce_fast.h), which
// produce a prefix of the output; the portable loops finish the rest.
template <class T>
size_t fastReduce(const RedOp&, T*, const T*, const T*, size_t, bool, bool) {
  return 0;
}
size_t fastReduce(const RedOp& op, Half* d, const Half* a, const Half* b, size_t n, bool pre,
                  bool post) {
  return reduce::reduceHalfF16C(op, d, a, b, n, pre, post);
}
size_t fastReduce(const RedOp& op, BFloat16* d, const BFloat16* a, const BFloat16* b, size_t n,
                  bool pre, bool post) {
  return reduce::reduceBf16Avx2(op, d, a, b, n, pre, post);
}
template <class T>
size_t fastReduceFp8(const RedOp& op, T* d, const T* a, const T* b, size_t n, bool pre,
                     bool post) {
  static_assert(sizeof(T) == 1, "fp8 storage is one byte");
  return reduce::reduceFp8Table(op, reinterpret_cast<uint8_t*>(d),
                                reinterpret_cast<const uint8_t*>(a),
                                reinterpret_cast<const uint8_t*>(b), n, pre, post);
}
size_t fastReduce(const RedOp& op, Fp8E4M3* d, const Fp8E4M3* a, const Fp8E4M3* b, size_t n,
                  bool pre, bool post) {
  return fastReduceFp8(op, d, a, b, n, pre, post);
}
size_t fastReduce(const RedOp& op, Fp8E5M2* d, const Fp8E5M2* a, const Fp8E5M2* b, size_t n,
                  bool pre, bool post) {
  return fastReduceFp8(op, d, a, b, n, pre, post);
}

template <class T>
size_t fastCopy(const RedOp&, T*, const T*, size_t, bool, bool) {
  return 0;
}
size_t fastCopy(const RedOp& op, Half* d, const Half* s, size_t n, bool pre, bool post) {
  return reduce::copyHalfF16C(op, d, s, n, pre, post);
}
size_t fastCopy(const RedOp& op, BFloat16* d, const BFloat16* s, size_t n, bool pre, bool post) {
  return reduce::copyBf16Avx2(op, d, s, n, pre, post);
}
size_t fastCopy(const RedOp& op, Fp8E4M3* d, const Fp8E4M3* s, size_t n, bool pre, bool post) {
  return reduce::copyFp8Table(op, reinterpret_cast<uint8_t*>(d),
                              reinterpret_cast<const uint8_t*>(s), n, pre, post);
}
size_t fastCopy(const RedOp& op, Fp8E5M2* d, const Fp8E5M2* s, size_t n, bool pre, bool post) {
  return reduce::copyFp8Table(op, reinterpret_cast<uint8_t*>(d),
                              reinterpret_cast<const uint8_t*>(s), n, pre, post);
}

template <class T>
void reduceTyped(const RedOp& op, void* dst, const void* a, const void* b, size_t n, bool pre,
                 bool post, bool fast) {
  T* d = static_cast<T*>(dst);
  const T* pa = static_cast<const T*>(a);
  const T* pb = static_cast<const T*>(b);
  const size_t done = fast ? fastReduce(op, d, pa, pb, n, pre, post) : 0;
  if (done == n) return;
  d += done;
  pa += done;
  pb += done;
  n -= done;
  reduce::withReduceFn<T>(op, pre, post, [&](auto fn) { binary(d, pa, pb, n, fn); });
}

template <class T>
void copyTyped(const RedOp& op, void* dst, const void* src, size_t n, bool pre, bool post,
               bool fast) {
  T* d = static_cast<T*>(dst);
  const T* s = static_cast<const T*>(src);
  const size_t done = fast ? fastCopy(op, d, s, n, pre, post) : 0;
  if (done == n) return;
  d += done;
  s += done;
  n -= done;
  reduce::withCopyFn<T>(
      op, pre, post, [&](auto fn) { unary(d, s, n, fn); },
      [&] {
        if (d != s && n != 0) std::memcpy(d, s, n * sizeof(T));
      });
}

// Calls fn.template operator()<StorageType>() for `type`; false for a bad type.
template <class Fn>
bool withType(ncclDataType_t type, Fn&& fn) {
  switch (type) {
    case ncclInt8: fn(int8_t()); return true;
    case ncclUint8: fn(uint8_t()); return true;
    case ncclInt32: fn(int32_t()); return true;
    case ncclUint32: fn(uint32_t()); return true;
    case ncclInt64: fn(int64_t()); return true;
    case ncclUint64: fn(uint64_t()); return true;
    case ncclFloat16: fn(Half()); return true;
    case ncclFloat32: fn(float()); return true;
    case ncclFloat64: fn(double()); return true;
    case ncclBfloat16: fn(BFloat16()); return true;
    case ncclFloat8e4m3: fn(Fp8E4M3()); return true;
    case ncclFloat8e5m2: fn(Fp8E5M2()); return true;
    default: return false;
  }
}

}  // namespace

void hostCopyWith(const RedOp& op, void* dst, const void* src, size_t count,
                  bool srcIsContribution, bool final, bool fast) {
  if (count == 0) return;
  withType(op.type, [&](auto tag) {
    copyTyped<decltype(tag)>(op, dst, src, count, srcIsContribution, final, fast);
  });
}

void hostReduceWith(const RedOp& op, void* dst, const void* a, const void* b, size_t count,
                    bool bIsContribution, bool final, bool fast) {
  if (count == 0) return;
  withType(op.type, [&](auto tag) {
    reduceTyped<decltype(tag)>(op, dst, a, b, count, bIsContribution, final, fast);
  });
}

void hostCopy(const RedOp& op, void* dst, const void* src, size_t count, bool srcIsContribution,
              bool final) {
  reduce::hostCopyWith(op, dst, src, count, srcIsContribution, final, true);
}

void hostReduce(const RedOp& op, void* dst, const void* a, const void* b, size_t count,
                bool bIsContribution, bool final) {
  reduce::hostReduceWith(op, dst, a, b, count, bIsContribution, final, true);
}

}  // namespace braid::reduce
