#include "core/wire_type.h"

#include <cstring>
#include <string>

#include "base/env.h"
#include "reduce/wire_loops.h"

namespace braid::core {

Result wireTypeOfDatatype(ncclDataType_t type, const char* caller, reduce::WireType* out) {
  switch (type) {
    case ncclFloat32: *out = reduce::WireType::None; return Result::success();
    case ncclBfloat16: *out = reduce::WireType::BFloat16; return Result::success();
    case ncclFloat16: *out = reduce::WireType::Float16; return Result::success();
    case ncclFloat8e4m3: *out = reduce::WireType::Fp8E4M3; return Result::success();
    case ncclFloat8e5m2: *out = reduce::WireType::Fp8E5M2; return Result::success();
    default:
      return fail(ncclInvalidArgument,
                  "%s: type %d is not a wire type; expected ncclFloat32 (off), ncclBfloat16, ncclFloat16, "
                  "ncclFloat8e4m3 or ncclFloat8e5m2",
                  caller, int(type));
  }
}

Result wireTypeFromEnv(reduce::WireType* out) {
  const std::string word = envString("BRAID_WIRE_TYPE", "none");
  for (reduce::WireType w : {reduce::WireType::None, reduce::WireType::BFloat16, reduce::WireType::Float16,
                             reduce::WireType::Fp8E4M3, reduce::WireType::Fp8E5M2})
    if (word == wireTypeName(w)) {
      *out = w;
      return Result::success();
    }
  // The datatypes' own names (nccl-tests' -d words) for the two 16-bit types.
  if (word == "bfloat16" || word == "float16") {
    *out = word == "bfloat16" ? reduce::WireType::BFloat16 : reduce::WireType::Float16;
    return Result::success();
  }
  return fail(ncclInvalidArgument,
              "BRAID_WIRE_TYPE=%s: expected bf16 (or bfloat16), fp16 (or float16), fp8e4m3, fp8e5m2 or none",
              word.c_str());
}

Result wireRoundTrip(const float* values, float* out, size_t count, ncclDataType_t type) {
  reduce::WireType wire = reduce::WireType::None;
  BRAID_TRY(wireTypeOfDatatype(type, "braidWireRoundTrip", &wire));
  if (count > 0 && (values == nullptr || out == nullptr))
    return fail(ncclInvalidArgument, "braidWireRoundTrip: values or out is NULL with count %zu", count);
  if (wire == reduce::WireType::None) {
    if (out != values && count > 0) memmove(out, values, count * sizeof(float));
    return Result::success();
  }
  reduce::WirePiece p;
  p.wire = wire;
  p.src = values;
  p.dst = out;
  p.round = true;
  p.count = count;
  reduce::runWirePieceOnHost(p);
  return Result::success();
}

}  // namespace braid::core
