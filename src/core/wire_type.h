// Wire types as the API and the environment name them (braidCommSetWireType,
// braidWireRoundTrip, BRAID_WIRE_TYPE); the format is src/reduce/wire_format.h,
// which calls use it engine/task_plan.h wireTypeFor.
#pragma once

#include <nccl.h>

#include <cstddef>

#include "base/result.h"
#include "reduce/wire_format.h"

namespace braid::core {

// The wire type an NCCL datatype names (ncclFloat32: none); others are refused
// with a message naming `caller`.
Result wireTypeOfDatatype(ncclDataType_t type, const char* caller, reduce::WireType* out);

// BRAID_WIRE_TYPE=bf16|fp16|fp8e4m3|fp8e5m2 (none or unset: off).
Result wireTypeFromEnv(reduce::WireType* out);

// out = what a peer decodes from values[0..count) sent as one message of `type`.
Result wireRoundTrip(const float* values, float* out, size_t count, ncclDataType_t type);

}  // namespace braid::core
