// fp8 reductions by table: an operator on two 8-bit values has only 65536
// cases, so its results fit a 64 KiB table (L2-resident) built once from the
// same element functions as the portable loops. One load per element replaces
// two decodes, a float operation and a rounding (~0.3 GB/s -> a few GB/s).
#include <memory>

#include "reduce/host_reduce_fast.h"
#include "reduce/reduce_ops.h"

namespace braid::reduce {
namespace {

// Below this count building a PreMulSum's 256-entry scaling table costs more
// than it saves.
constexpr size_t kMinCountForScaleTable = 512;

using Table = std::unique_ptr<uint8_t[]>;

template <class T, class Fn>
Table buildTable(Fn fn) {
  Table t = std::make_unique<uint8_t[]>(65536);
  for (uint32_t a = 0; a < 256; ++a) {
    for (uint32_t b = 0; b < 256; ++b) t[a << 8 | b] = fn(T{uint8_t(a)}, T{uint8_t(b)}).bits;
  }
  return t;
}

// Built on first use (thread-safe static initialisation), then read-only.
template <class T, class Fn>
const uint8_t* tableFor() {
  static const Table table = buildTable<T>(Fn());
  return table.get();
}

template <class T>
const uint8_t* tableFor(RedKind kind) {
  switch (kind) {
    case RedKind::Prod: return tableFor<T, ProdFn<T>>();
    case RedKind::Max: return tableFor<T, MaxFn<T>>();
    case RedKind::Min: return tableFor<T, MinFn<T>>();
    default: return tableFor<T, SumFn<T>>();
  }
}

// pre(x) for every x, for this op's scalar.
template <class T>
void buildScaleTable(const RedOp& op, uint8_t* out) {
  T s{op.scalar[0]};
  const ScaleFn<T> scale{Traits<T>::load(s)};
  for (uint32_t x = 0; x < 256; ++x) out[x] = scale(T{uint8_t(x)}).bits;
}

void buildScaleTable(const RedOp& op, uint8_t* out) {
  if (op.type == ncclFloat8e4m3) buildScaleTable<Fp8E4M3>(op, out);
  else buildScaleTable<Fp8E5M2>(op, out);
}

// The loops index with both operands loaded before the store: exact aliasing
// of dst with a or b is fine.
void lookup(const uint8_t* t, uint8_t* d, const uint8_t* a, const uint8_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = t[uint32_t(a[i]) << 8 | b[i]];
}
void lookupPre(const uint8_t* t, const uint8_t* pre, uint8_t* d, const uint8_t* a,
               const uint8_t* b, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = t[uint32_t(a[i]) << 8 | pre[b[i]]];
}

}  // namespace

size_t reduceFp8Table(const RedOp& op, uint8_t* dst, const uint8_t* a, const uint8_t* b,
                      size_t count, bool pre, bool post) {
  if (op.kind == RedKind::SumPostDiv && post) return 0;  // not built for floats
  const bool e4m3 = op.type == ncclFloat8e4m3;
  const uint8_t* table = e4m3 ? tableFor<Fp8E4M3>(op.kind) : tableFor<Fp8E5M2>(op.kind);
  if (op.kind == RedKind::PreMulSum && pre) {
    if (count < kMinCountForScaleTable) return 0;
    uint8_t scale[256];
    buildScaleTable(op, scale);
    lookupPre(table, scale, dst, a, b, count);
    return count;
  }
  lookup(table, dst, a, b, count);
  return count;
}

size_t copyFp8Table(const RedOp& op, uint8_t* dst, const uint8_t* src, size_t count, bool pre,
                    bool post) {
  if (!pre || op.kind != RedKind::PreMulSum || count < kMinCountForScaleTable) return 0;
  uint8_t scale[256];
  buildScaleTable(op, scale);
  for (size_t i = 0; i < count; ++i) dst[i] = scale[src[i]];
  return count;
}

}  // namespace braid::reduce
