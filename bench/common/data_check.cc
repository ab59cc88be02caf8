#include "common/data_check.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace braid::bench {
namespace {

constexpr unsigned char kGuardByte = 0xA5;
// Elements converted per step: big enough to amortise, small enough for L1/L2.
constexpr size_t kBlock = 2048;

uint64_t mix(uint64_t x) {
  // splitmix64 finaliser: cheap, and neighbouring indices give unrelated values.
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, range) without a division.
uint64_t bounded(uint64_t h, uint64_t range) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(h) * range) >> 64);
}

// Largest k such that 2^k is exact in the type (and small enough to keep
// products of integers from overflowing).
int maxProdExponent(const TypeInfo& t) {
  switch (t.type) {
    case ncclInt8: return 6;
    case ncclUint8: return 7;
    case ncclFloat8e4m3: return 8;
    case ncclFloat8e5m2:
    case ncclFloat16: return 15;
    default: return 20;
  }
}

// The inputs of every rank, with everything that does not depend on the
// element index computed once.
class Generator {
 public:
  explicit Generator(const DataPattern& p)
      : p_(p), m_(p.maxExactInt ? p.maxExactInt : p.type->maxExactInt),
        budget_((p.maxExactInt ? p.maxExactInt : p.type->maxExactInt) / p.nranks),
        kmax_(std::min(maxProdExponent(*p.type), p.nranks)) {
    keys_.resize(static_cast<size_t>(p.nranks) + 1);
    for (int r = 0; r <= p.nranks; ++r) keys_[static_cast<size_t>(r)] = mix(p.seed * 0x100000001B3ull + static_cast<uint64_t>(r));
  }

  double value(int rank, size_t index) const {
    const uint64_t h = mix(index ^ keys_[static_cast<size_t>(rank)]);
    if (!p_.reduction) return anyValue(h);
    switch (p_.op) {
      case ncclSum:
      case ncclAvg: return sumValue(rank, index, h);
      case ncclProd: return prodValue(rank, index);
      default: return anyValue(h);  // min, max
    }
  }

  // Expected result of reducing element `index` over all ranks; *tolerance
  // is 0 except for ncclAvg on floating types.
  double reduced(size_t index, double* tolerance) const {
    *tolerance = 0;
    double acc = value(0, index);
    double sumAbs = std::fabs(acc);
    for (int r = 1; r < p_.nranks; ++r) {
      const double v = value(r, index);
      sumAbs += std::fabs(v);
      switch (p_.op) {
        case ncclProd: acc *= v; break;
        case ncclMax: acc = std::max(acc, v); break;
        case ncclMin: acc = std::min(acc, v); break;
        default: acc += v; break;  // sum, avg
      }
    }
    if (p_.op == ncclAvg) {
      if (p_.type->isFloat) {
        acc /= p_.nranks;
        // Each of the n pre-multiplied terms and n-1 additions rounds once.
        *tolerance = (p_.epsilon ? p_.epsilon : p_.type->epsilon) * (p_.nranks + 2) * (sumAbs / p_.nranks);
      } else {
        acc = std::trunc(acc / p_.nranks);  // integers: sum, then divide
      }
    }
    return acc;
  }

 private:
  double anyValue(uint64_t h) const {
    if (p_.type->isSigned) return static_cast<double>(static_cast<int64_t>(bounded(h, 2 * m_ + 1)) - m_);
    return static_cast<double>(bounded(h, m_ + 1));
  }

  double sumValue(int rank, size_t index, uint64_t h) const {
    // n values of at most `budget_` sum exactly.
    if (budget_ >= 1) return static_cast<double>(bounded(h, budget_ + 1));
    // More ranks than exact integers: one rank per element contributes.
    return (index % p_.nranks == static_cast<size_t>(rank)) ? static_cast<double>(1 + bounded(h, m_)) : 0.0;
  }

  double prodValue(int rank, size_t index) const {
    // Exactly t(index) ranks contribute a 2, the rest a 1: the product is 2^t.
    const uint64_t t = bounded(mix(index ^ keys_[static_cast<size_t>(p_.nranks)]), kmax_ + 1);
    const uint64_t slot = (index * 131 + static_cast<uint64_t>(rank)) % static_cast<uint64_t>(p_.nranks);
    return slot < t ? 2.0 : 1.0;
  }

  const DataPattern& p_;
  const int64_t m_;
  const int64_t budget_;
  const uint64_t kmax_;
  std::vector<uint64_t> keys_;  // per rank, and one more for the product pattern
};

bool matches(double got, double want, double tolerance) {
  if (tolerance == 0) return got == want;
  return std::fabs(got - want) <= tolerance;  // false for NaN
}

}  // namespace

DataPattern forWireType(DataPattern p) {
  const char* w = std::getenv("BRAID_WIRE_TYPE");
  const ncclDataType_t type = p.type->type;
  if (w == nullptr || (type != ncclFloat32 && type != ncclBfloat16) || (p.op != ncclSum && p.op != ncclAvg))
    return p;
  // Integers every partial sum may reach exactly: 2^(mantissa bits + 1).
  // bfloat16 travels narrowed only under the fp8 wires.
  const std::string wire = w;
  if (type == ncclBfloat16 && wire.rfind("fp8", 0) != 0) return p;
  if (wire == "bf16") p.maxExactInt = 256, p.epsilon = std::ldexp(1.0, -8);
  if (wire == "fp16") p.maxExactInt = 2048, p.epsilon = std::ldexp(1.0, -11);
  if (wire == "fp8e4m3") p.maxExactInt = 16, p.epsilon = std::ldexp(1.0, -4);
  if (wire == "fp8e5m2") p.maxExactInt = 8, p.epsilon = std::ldexp(1.0, -3);
  return p;
}

double inputValue(const DataPattern& p, int rank, size_t index) { return Generator(p).value(rank, index); }

void fillInput(const DataPattern& p, int rank, void* buf, size_t count, size_t firstIndex) {
  const Generator gen(p);
  auto* out = static_cast<unsigned char*>(buf);
  double values[kBlock];
  for (size_t done = 0; done < count; done += kBlock) {
    const size_t n = std::min(kBlock, count - done);
    for (size_t i = 0; i < n; ++i) values[i] = gen.value(rank, firstIndex + done + i);
    encodeBuffer(p.type->type, values, n, out + done * p.type->size);
  }
}

int64_t countWrong(const DataPattern& p, const void* data, size_t count,
                   const std::function<Expect(size_t)>& expectAt) {
  const Generator gen(p);
  const auto* in = static_cast<const unsigned char*>(data);
  double got[kBlock];
  int64_t wrong = 0;
  for (size_t done = 0; done < count; done += kBlock) {
    const size_t n = std::min(kBlock, count - done);
    decodeBuffer(p.type->type, in + done * p.type->size, n, got);
    for (size_t i = 0; i < n; ++i) {
      const Expect e = expectAt(done + i);
      if (e.kind == Expect::kUnchecked) continue;
      double tolerance = 0;
      // Generated inputs are exact in the type, so a copy must match exactly.
      const double want =
          e.kind == Expect::kCopy ? gen.value(e.srcRank, e.srcIndex) : gen.reduced(e.srcIndex, &tolerance);
      if (!matches(got[i], want, tolerance)) ++wrong;
    }
  }
  return wrong;
}

void fillGuard(void* data, size_t bytes) { std::memset(data, kGuardByte, bytes); }

int64_t countGuardDamage(const void* data, size_t bytes) {
  const auto* in = static_cast<const unsigned char*>(data);
  return std::count_if(in, in + bytes, [](unsigned char b) { return b != kGuardByte; });
}

}  // namespace braid::bench
