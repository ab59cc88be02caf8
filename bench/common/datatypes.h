// The element types and reduction operators the perf tools sweep over, and
// exact conversions between every NCCL element type and double. The tools
// generate and check data in double, so each type only needs encode/decode.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace braid::bench {

struct TypeInfo {
  ncclDataType_t type;
  const char* name;  // as printed in the table ("float", "bfloat16", ...)
  size_t size;       // bytes per element
  bool isFloat;
  bool isSigned;
  // Largest integer m such that every integer in [0, m] is exact in the type
  // (capped for wide types so data stays small and sums never overflow).
  int64_t maxExactInt;
  // Relative rounding unit 2^-mantissaBits (0 for integer types).
  double epsilon;
};

struct OpInfo {
  ncclRedOp_t op;
  const char* name;
};

// All 12 types in NCCL enum order.
const std::vector<TypeInfo>& allTypes();
const TypeInfo& typeInfo(ncclDataType_t type);
// Accepts the nccl-tests names and common aliases (fp8e4m3/f8e4m3, bf16, fp16...).
// Returns false for unknown names.
bool parseTypeName(const std::string& name, std::vector<TypeInfo>* out);

// sum, prod, max, min, avg.
const std::vector<OpInfo>& allOps();
bool parseOpName(const std::string& name, std::vector<OpInfo>* out);
const char* opName(ncclRedOp_t op);

// Writes `value` (already representable, or rounded to nearest even) as an
// element of `type` at `dst`.
void encodeValue(ncclDataType_t type, double value, void* dst);
// Reads the element of `type` at `src` as a double.
double decodeValue(ncclDataType_t type, const void* src);

// Bulk forms of the two above, for whole buffers: same results, several
// times faster (type dispatch once per call, tables for the narrow floats).
void encodeBuffer(ncclDataType_t type, const double* src, size_t count, void* dst);
void decodeBuffer(ncclDataType_t type, const void* src, size_t count, double* dst);

}  // namespace braid::bench
