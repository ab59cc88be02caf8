#include "common/datatypes.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

namespace braid::bench {
namespace {

// A binary floating-point format narrower than float: half, bfloat16, fp8.
struct MiniFloat {
  int expBits;
  int manBits;
  int bias;
  // OCP e4m3 ("fn"): no infinities, only S.1111.111 is NaN, max 448.
  bool finiteOnly;
};

constexpr MiniFloat kHalf{5, 10, 15, false};
constexpr MiniFloat kBf16{8, 7, 127, false};
constexpr MiniFloat kE4m3{4, 3, 7, true};
constexpr MiniFloat kE5m2{5, 2, 15, false};

double miniDecode(const MiniFloat& f, uint32_t bits) {
  const uint32_t manMask = (1u << f.manBits) - 1;
  const uint32_t expMask = (1u << f.expBits) - 1;
  const bool negative = (bits >> (f.expBits + f.manBits)) & 1u;
  const uint32_t exp = (bits >> f.manBits) & expMask;
  const uint32_t man = bits & manMask;
  double value;
  if (exp == expMask && !f.finiteOnly) {
    value = man ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else if (exp == expMask && f.finiteOnly && man == manMask) {
    value = std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    value = std::ldexp(static_cast<double>(man), 1 - f.bias - f.manBits);
  } else {
    value = std::ldexp(static_cast<double>(man | (1u << f.manBits)),
                       static_cast<int>(exp) - f.bias - f.manBits);
  }
  return negative ? -value : value;
}

// Round to nearest even; values beyond the range saturate to the largest
// finite value (finite-only formats) or to infinity.
uint32_t miniEncode(const MiniFloat& f, double value) {
  const uint32_t signBit = 1u << (f.expBits + f.manBits);
  const uint32_t expMask = (1u << f.expBits) - 1;
  const uint32_t sign = std::signbit(value) ? signBit : 0;
  if (std::isnan(value)) return sign | (expMask << f.manBits) | ((1u << f.manBits) - 1);
  double a = std::fabs(value);
  if (a == 0) return sign;
  const int maxExp = f.finiteOnly ? static_cast<int>(expMask) - f.bias
                                  : static_cast<int>(expMask) - 1 - f.bias;
  const int minExp = 1 - f.bias;
  int e;
  std::frexp(a, &e);
  e -= 1;  // a = 1.m * 2^e
  if (e < minExp) e = minExp;  // subnormal: fixed quantum
  double q = std::nearbyint(std::ldexp(a, f.manBits - e));  // significand incl. hidden bit
  if (q >= std::ldexp(1.0, f.manBits + 1)) {  // rounding carried into the next binade
    q /= 2;
    e += 1;
  }
  uint32_t man = static_cast<uint32_t>(q);
  uint32_t exp;
  if (man < (1u << f.manBits)) {
    exp = 0;  // subnormal
  } else {
    exp = static_cast<uint32_t>(e + f.bias);
    man &= (1u << f.manBits) - 1;
  }
  const bool overflow = e > maxExp || (f.finiteOnly && e == maxExp && man == (1u << f.manBits) - 1);
  if (overflow) {
    if (f.finiteOnly) return sign | (expMask << f.manBits) | ((1u << f.manBits) - 2);
    return sign | (expMask << f.manBits);
  }
  return sign | (exp << f.manBits) | man;
}

template <typename T>
void store(void* dst, T v) { std::memcpy(dst, &v, sizeof v); }
template <typename T>
T load(const void* src) {
  T v;
  std::memcpy(&v, src, sizeof v);
  return v;
}

// Integers wrap like the library's arithmetic does (two's complement).
template <typename T>
T toInt(double value) {
  if (std::is_signed<T>::value) return static_cast<T>(static_cast<int64_t>(value));
  return static_cast<T>(static_cast<uint64_t>(static_cast<int64_t>(value)));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const std::vector<TypeInfo>& allTypes() {
  static const std::vector<TypeInfo> types = {
      {ncclInt8, "int8", 1, false, true, 127, 0},
      {ncclUint8, "uint8", 1, false, false, 255, 0},
      {ncclInt32, "int32", 4, false, true, 1 << 20, 0},
      {ncclUint32, "uint32", 4, false, false, 1 << 20, 0},
      {ncclInt64, "int64", 8, false, true, 1 << 20, 0},
      {ncclUint64, "uint64", 8, false, false, 1 << 20, 0},
      {ncclFloat16, "half", 2, true, true, 2048, 0x1p-10},
      {ncclFloat32, "float", 4, true, true, 1 << 20, 0x1p-23},
      {ncclFloat64, "double", 8, true, true, 1 << 20, 0x1p-52},
      {ncclBfloat16, "bfloat16", 2, true, true, 256, 0x1p-7},
      {ncclFloat8e4m3, "fp8e4m3", 1, true, true, 16, 0x1p-3},
      {ncclFloat8e5m2, "fp8e5m2", 1, true, true, 8, 0x1p-2},
  };
  return types;
}

const TypeInfo& typeInfo(ncclDataType_t type) {
  for (const TypeInfo& t : allTypes())
    if (t.type == type) return t;
  return allTypes()[static_cast<size_t>(ncclFloat32)];
}

bool parseTypeName(const std::string& raw, std::vector<TypeInfo>* out) {
  const std::string name = lower(raw);
  if (name == "all") {
    *out = allTypes();
    return true;
  }
  struct Alias {
    const char* name;
    ncclDataType_t type;
  };
  static const Alias aliases[] = {
      {"int8", ncclInt8},          {"char", ncclInt8},           {"uint8", ncclUint8},
      {"int32", ncclInt32},        {"int", ncclInt32},           {"uint32", ncclUint32},
      {"int64", ncclInt64},        {"uint64", ncclUint64},       {"half", ncclFloat16},
      {"float16", ncclFloat16},    {"fp16", ncclFloat16},        {"float", ncclFloat32},
      {"float32", ncclFloat32},    {"fp32", ncclFloat32},        {"double", ncclFloat64},
      {"float64", ncclFloat64},    {"fp64", ncclFloat64},        {"bfloat16", ncclBfloat16},
      {"bf16", ncclBfloat16},      {"fp8e4m3", ncclFloat8e4m3},  {"f8e4m3", ncclFloat8e4m3},
      {"e4m3", ncclFloat8e4m3},    {"fp8e5m2", ncclFloat8e5m2},  {"f8e5m2", ncclFloat8e5m2},
      {"e5m2", ncclFloat8e5m2},
  };
  for (const Alias& a : aliases) {
    if (name == a.name) {
      *out = {typeInfo(a.type)};
      return true;
    }
  }
  return false;
}

const std::vector<OpInfo>& allOps() {
  static const std::vector<OpInfo> ops = {
      {ncclSum, "sum"}, {ncclProd, "prod"}, {ncclMax, "max"}, {ncclMin, "min"}, {ncclAvg, "avg"}};
  return ops;
}

bool parseOpName(const std::string& raw, std::vector<OpInfo>* out) {
  const std::string name = lower(raw);
  if (name == "all") {
    *out = allOps();
    return true;
  }
  for (const OpInfo& o : allOps()) {
    if (name == o.name) {
      *out = {o};
      return true;
    }
  }
  return false;
}

const char* opName(ncclRedOp_t op) {
  for (const OpInfo& o : allOps())
    if (o.op == op) return o.name;
  return "none";
}

void encodeValue(ncclDataType_t type, double value, void* dst) {
  switch (type) {
    case ncclInt8: store(dst, toInt<int8_t>(value)); break;
    case ncclUint8: store(dst, toInt<uint8_t>(value)); break;
    case ncclInt32: store(dst, toInt<int32_t>(value)); break;
    case ncclUint32: store(dst, toInt<uint32_t>(value)); break;
    case ncclInt64: store(dst, toInt<int64_t>(value)); break;
    case ncclUint64: store(dst, toInt<uint64_t>(value)); break;
    case ncclFloat16: store(dst, static_cast<uint16_t>(miniEncode(kHalf, value))); break;
    case ncclFloat32: store(dst, static_cast<float>(value)); break;
    case ncclFloat64: store(dst, value); break;
    case ncclBfloat16: store(dst, static_cast<uint16_t>(miniEncode(kBf16, value))); break;
    case ncclFloat8e4m3: store(dst, static_cast<uint8_t>(miniEncode(kE4m3, value))); break;
    case ncclFloat8e5m2: store(dst, static_cast<uint8_t>(miniEncode(kE5m2, value))); break;
    default: break;
  }
}

double decodeValue(ncclDataType_t type, const void* src) {
  switch (type) {
    case ncclInt8: return load<int8_t>(src);
    case ncclUint8: return load<uint8_t>(src);
    case ncclInt32: return load<int32_t>(src);
    case ncclUint32: return load<uint32_t>(src);
    case ncclInt64: return static_cast<double>(load<int64_t>(src));
    case ncclUint64: return static_cast<double>(load<uint64_t>(src));
    case ncclFloat16: return miniDecode(kHalf, load<uint16_t>(src));
    case ncclFloat32: return load<float>(src);
    case ncclFloat64: return load<double>(src);
    case ncclBfloat16: return miniDecode(kBf16, load<uint16_t>(src));
    case ncclFloat8e4m3: return miniDecode(kE4m3, load<uint8_t>(src));
    case ncclFloat8e5m2: return miniDecode(kE5m2, load<uint8_t>(src));
    default: return std::numeric_limits<double>::quiet_NaN();
  }
}

namespace {

// Every value of a 16-bit or 8-bit float format, decoded once.
const std::vector<double>& decodeTable(const MiniFloat& f, int bits) {
  auto build = [&f, bits] {
    std::vector<double> t(size_t{1} << bits);
    for (size_t i = 0; i < t.size(); ++i) t[i] = miniDecode(f, static_cast<uint32_t>(i));
    return t;
  };
  // One table per format; the generated data makes these the hot path.
  if (&f == &kHalf) { static const std::vector<double> t = build(); return t; }
  if (&f == &kBf16) { static const std::vector<double> t = build(); return t; }
  if (&f == &kE4m3) { static const std::vector<double> t = build(); return t; }
  static const std::vector<double> t = build();
  return t;
}

// Encodings of the integers in [-kIntRange, kIntRange], which is what the
// perf tools' data consists of.
constexpr int kIntRange = 4096;

const std::vector<uint16_t>& intEncodeTable(const MiniFloat& f) {
  auto build = [&f] {
    std::vector<uint16_t> t(2 * kIntRange + 1);
    for (int v = -kIntRange; v <= kIntRange; ++v) t[v + kIntRange] = static_cast<uint16_t>(miniEncode(f, v));
    return t;
  };
  if (&f == &kHalf) { static const std::vector<uint16_t> t = build(); return t; }
  if (&f == &kBf16) { static const std::vector<uint16_t> t = build(); return t; }
  if (&f == &kE4m3) { static const std::vector<uint16_t> t = build(); return t; }
  static const std::vector<uint16_t> t = build();
  return t;
}

template <typename Bits>
void encodeMini(const MiniFloat& f, const double* src, size_t count, void* dst) {
  const std::vector<uint16_t>& table = intEncodeTable(f);
  auto* out = static_cast<Bits*>(dst);
  for (size_t i = 0; i < count; ++i) {
    const double v = src[i];
    const bool small = v >= -kIntRange && v <= kIntRange && v == static_cast<double>(static_cast<int>(v));
    out[i] = static_cast<Bits>(small ? table[static_cast<int>(v) + kIntRange] : miniEncode(f, v));
  }
}

template <typename Bits>
void decodeMini(const MiniFloat& f, const void* src, size_t count, double* dst) {
  const std::vector<double>& table = decodeTable(f, 8 * sizeof(Bits));
  const auto* in = static_cast<const Bits*>(src);
  for (size_t i = 0; i < count; ++i) dst[i] = table[in[i]];
}

template <typename T>
void encodeNative(const double* src, size_t count, void* dst) {
  auto* out = static_cast<T*>(dst);
  for (size_t i = 0; i < count; ++i) {
    if constexpr (std::is_floating_point<T>::value) {
      out[i] = static_cast<T>(src[i]);
    } else {
      out[i] = toInt<T>(src[i]);
    }
  }
}

template <typename T>
void decodeNative(const void* src, size_t count, double* dst) {
  const auto* in = static_cast<const T*>(src);
  for (size_t i = 0; i < count; ++i) dst[i] = static_cast<double>(in[i]);
}

}  // namespace

void encodeBuffer(ncclDataType_t type, const double* src, size_t count, void* dst) {
  switch (type) {
    case ncclInt8: encodeNative<int8_t>(src, count, dst); break;
    case ncclUint8: encodeNative<uint8_t>(src, count, dst); break;
    case ncclInt32: encodeNative<int32_t>(src, count, dst); break;
    case ncclUint32: encodeNative<uint32_t>(src, count, dst); break;
    case ncclInt64: encodeNative<int64_t>(src, count, dst); break;
    case ncclUint64: encodeNative<uint64_t>(src, count, dst); break;
    case ncclFloat16: encodeMini<uint16_t>(kHalf, src, count, dst); break;
    case ncclFloat32: encodeNative<float>(src, count, dst); break;
    case ncclFloat64: encodeNative<double>(src, count, dst); break;
    case ncclBfloat16: encodeMini<uint16_t>(kBf16, src, count, dst); break;
    case ncclFloat8e4m3: encodeMini<uint8_t>(kE4m3, src, count, dst); break;
    case ncclFloat8e5m2: encodeMini<uint8_t>(kE5m2, src, count, dst); break;
    default: break;
  }
}

void decodeBuffer(ncclDataType_t type, const void* src, size_t count, double* dst) {
  switch (type) {
    case ncclInt8: decodeNative<int8_t>(src, count, dst); break;
    case ncclUint8: decodeNative<uint8_t>(src, count, dst); break;
    case ncclInt32: decodeNative<int32_t>(src, count, dst); break;
    case ncclUint32: decodeNative<uint32_t>(src, count, dst); break;
    case ncclInt64: decodeNative<int64_t>(src, count, dst); break;
    case ncclUint64: decodeNative<uint64_t>(src, count, dst); break;
    case ncclFloat16: decodeMini<uint16_t>(kHalf, src, count, dst); break;
    case ncclFloat32: decodeNative<float>(src, count, dst); break;
    case ncclFloat64: decodeNative<double>(src, count, dst); break;
    case ncclBfloat16: decodeMini<uint16_t>(kBf16, src, count, dst); break;
    case ncclFloat8e4m3: decodeMini<uint8_t>(kE4m3, src, count, dst); break;
    case ncclFloat8e5m2: decodeMini<uint8_t>(kE5m2, src, count, dst); break;
    default: std::fill(dst, dst + count, std::numeric_limits<double>::quiet_NaN()); break;
  }
}

}  // namespace braid::bench
