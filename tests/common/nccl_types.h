// The 12 NCCL datatypes as seen by tests: size, name, exactness limits, and
// reading/writing one element as a double. Independent of the library's code
// (narrow floats go through tests/common/narrow_float.h).
//
// Doubles hold every value the tests generate exactly: integers stay within
// +-2^52 (64-bit types included), floats are finite values of their type.
#ifndef BRAID_TESTS_COMMON_NCCL_TYPES_H_
#define BRAID_TESTS_COMMON_NCCL_TYPES_H_

#include <nccl.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/narrow_float.h"

namespace ncclt {

enum class Kind { kSigned, kUnsigned, kFloat };

struct TypeInfo {
  ncclDataType_t type;
  const char* name;
  size_t size;
  Kind kind;
  // Every integer of magnitude <= exactMax is representable (for 64-bit
  // integers: the limit of a double, which the tests keep to).
  double exactMax;
};

inline const TypeInfo* allTypes() {
  static const TypeInfo types[] = {
      {ncclInt8, "int8", 1, Kind::kSigned, 127.0},
      {ncclUint8, "uint8", 1, Kind::kUnsigned, 255.0},
      {ncclInt32, "int32", 4, Kind::kSigned, 2147483647.0},
      {ncclUint32, "uint32", 4, Kind::kUnsigned, 4294967295.0},
      {ncclInt64, "int64", 8, Kind::kSigned, 4503599627370496.0},    // 2^52
      {ncclUint64, "uint64", 8, Kind::kUnsigned, 4503599627370496.0},  // 2^52
      {ncclFloat16, "float16", 2, Kind::kFloat, 2048.0},
      {ncclFloat32, "float32", 4, Kind::kFloat, 16777216.0},
      {ncclFloat64, "float64", 8, Kind::kFloat, 4503599627370496.0},
      {ncclBfloat16, "bfloat16", 2, Kind::kFloat, 256.0},
      {ncclFloat8e4m3, "float8e4m3", 1, Kind::kFloat, 16.0},
      {ncclFloat8e5m2, "float8e5m2", 1, Kind::kFloat, 8.0},
  };
  return types;
}
constexpr int kNumTypes = 12;

inline const TypeInfo& typeInfo(ncclDataType_t t) {
  for (int i = 0; i < kNumTypes; ++i)
    if (allTypes()[i].type == t) return allTypes()[i];
  return allTypes()[0];
}

inline bool isNarrowFloat(ncclDataType_t t) {
  return t == ncclFloat16 || t == ncclBfloat16 || t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}

inline testfloat::Format narrowFormat(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16: return testfloat::kFp16;
    case ncclBfloat16: return testfloat::kBf16;
    case ncclFloat8e4m3: return testfloat::kE4m3;
    default: return testfloat::kE5m2;
  }
}

template <typename T>
inline T readAs(const void* buf, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
inline void writeAs(void* buf, size_t i, T v) {
  std::memcpy(static_cast<char*>(buf) + i * sizeof(T), &v, sizeof(T));
}

// The raw bits of a narrow float element.
inline uint32_t readBits(const TypeInfo& t, const void* buf, size_t i) {
  return t.size == 1 ? readAs<uint8_t>(buf, i) : readAs<uint16_t>(buf, i);
}

inline double load(const TypeInfo& t, const void* buf, size_t i) {
  switch (t.type) {
    case ncclInt8: return readAs<int8_t>(buf, i);
    case ncclUint8: return readAs<uint8_t>(buf, i);
    case ncclInt32: return readAs<int32_t>(buf, i);
    case ncclUint32: return readAs<uint32_t>(buf, i);
    case ncclInt64: return static_cast<double>(readAs<int64_t>(buf, i));
    case ncclUint64: return static_cast<double>(readAs<uint64_t>(buf, i));
    case ncclFloat32: return readAs<float>(buf, i);
    case ncclFloat64: return readAs<double>(buf, i);
    default: return testfloat::decode(readBits(t, buf, i), narrowFormat(t.type));
  }
}

// Stores v rounded to the type (integers: v must be an integer in range).
inline void store(const TypeInfo& t, void* buf, size_t i, double v) {
  switch (t.type) {
    case ncclInt8: writeAs<int8_t>(buf, i, static_cast<int8_t>(v)); break;
    case ncclUint8: writeAs<uint8_t>(buf, i, static_cast<uint8_t>(v)); break;
    case ncclInt32: writeAs<int32_t>(buf, i, static_cast<int32_t>(v)); break;
    case ncclUint32: writeAs<uint32_t>(buf, i, static_cast<uint32_t>(v)); break;
    case ncclInt64: writeAs<int64_t>(buf, i, static_cast<int64_t>(v)); break;
    case ncclUint64: writeAs<uint64_t>(buf, i, static_cast<uint64_t>(v)); break;
    case ncclFloat32: writeAs<float>(buf, i, static_cast<float>(v)); break;
    case ncclFloat64: writeAs<double>(buf, i, v); break;
    default: {
      const uint32_t bits = testfloat::encode(v, narrowFormat(t.type));
      if (t.size == 1)
        writeAs<uint8_t>(buf, i, static_cast<uint8_t>(bits));
      else
        writeAs<uint16_t>(buf, i, static_cast<uint16_t>(bits));
    }
  }
}

// v rounded to the nearest value of the type.
inline double quantize(const TypeInfo& t, double v) {
  unsigned char tmp[8];
  store(t, tmp, 0, v);
  return load(t, tmp, 0);
}

// Decodes raw random bits as a finite, non-negative-zero value of a float
// type; false when the bits are NaN, infinite or -0.
inline bool finiteFromBits(const TypeInfo& t, uint64_t bits, double* out) {
  double v;
  switch (t.type) {
    case ncclFloat32: {
      const uint32_t b = static_cast<uint32_t>(bits);
      float f;
      std::memcpy(&f, &b, 4);
      v = f;
      break;
    }
    case ncclFloat64: std::memcpy(&v, &bits, 8); break;
    default: {
      const uint32_t mask = t.size == 1 ? 0xffu : 0xffffu;
      v = testfloat::decode(static_cast<uint32_t>(bits) & mask, narrowFormat(t.type));
    }
  }
  if (!std::isfinite(v) || (v == 0.0 && std::signbit(v))) return false;
  *out = v;
  return true;
}

inline const char* opName(ncclRedOp_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    default: return "premulsum";
  }
}

}  // namespace ncclt

#endif  // BRAID_TESTS_COMMON_NCCL_TYPES_H_
