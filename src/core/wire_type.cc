#include "core/wire_type.h"

#include <cstring>
#include <string>

#include "base/env.h"
#include "reduce/wire_loops.h"

namespace braid {

Result wireTypeOfDatatype(ncclDataType_t type, const char* caller, WireType* out) {
  switch (type) {
    case ncclFloat32: *out = WireType::None; return Result::success();
    case ncclBfloat16: *out = WireType::BFloat16; return Result::success();
    case ncclFloat16: *out = WireType::Float16; return Result::success();
    case ncclFloat8e4m3: *out = WireType::Fp8E4M3; return Result::success();
    case ncclFloat8e5m2: *out = WireType::Fp8E5M2; return Result::success();
    default:
      return fail(ncclInvalidArgument,
                  "%s: type %d is not a wire type; expected ncclFloat32 (off), ncclBfloat16, ncclFloat16, "
                  "ncclFloat8e4m3 or ncclFloat8e5m2",
                  caller, int(type));
  }
}

Result wireTypeFromEnv(WireType* out) {
  const std::string word = envString("BRAID_WIRE_TYPE", "none");
  for (WireType w : {WireType::None, WireType::BFloat16, WireType::Float16, WireType::Fp8E4M3, WireType::Fp8E5M2})
    if (word == wireTypeName(w)) {
      *out = w;
      return Result::success();
    }
  return fail(ncclInvalidArgument, "BRAID_WIRE_TYPE=%s: expected bf16, fp16, fp8e4m3, fp8e5m2 or none", word.c_str());
}

Result wireRoundTrip(const float* values, float* out, size_t count, ncclDataType_t type) {
  WireType wire = WireType::None;
  BRAID_TRY(wireTypeOfDatatype(type, "braidWireRoundTrip", &wire));
  if (count > 0 && (values == nullptr || out == nullptr))
    return fail(ncclInvalidArgument, "braidWireRoundTrip: values or out is NULL with count %zu", count);
  if (wire == WireType::None) {
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

}  // namespace braid
