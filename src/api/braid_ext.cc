// braid's extensions (include/braid.h): what NCCL's API has no word for but
// frameworks on top of braid need, such as a per-communicator timeout.
#include "braid.h"

#include <nccl.h>

#include <cmath>
#include <cstring>

#include "api/api_util.h"
#include "api/init_entry.h"
#include "bootstrap/bootstrap.h"
#include "core/comm_registry.h"
#include "engine/comm.h"
#include "engine/device/device.h"
#include "reduce/wire_loops.h"

using namespace braid;

extern "C" BRAID_EXPORT ncclResult_t braidCommSetTimeout(ncclComm_t comm, double seconds) try {
  Result r = checkComm(comm, "braidCommSetTimeout");
  if (r.ok() && (!std::isfinite(seconds) || seconds <= 0))
    r = fail(ncclInvalidArgument, "braidCommSetTimeout: timeout %g s is not a positive number", seconds);
  if (!r.ok()) return report(r);
  comm->settings.timeoutSeconds = seconds;
  return ncclSuccess;
} BRAID_API_CATCH(braidCommSetTimeout)

extern "C" BRAID_EXPORT ncclResult_t braidCommSetReproducible(ncclComm_t comm, int on) try {
  Result r = checkComm(comm, "braidCommSetReproducible");
  if (r.ok() && on != 0 && on != 1)
    r = fail(ncclInvalidArgument, "braidCommSetReproducible: on is %d; expected 1 (on) or 0 (off)", on);
  if (!r.ok()) return report(r);
  comm->settings.reproducible = on == 1;
  return ncclSuccess;
} BRAID_API_CATCH(braidCommSetReproducible)

namespace {

// The wire type an NCCL datatype names (ncclFloat32: none).
Result wireTypeOf(ncclDataType_t type, const char* caller, WireType* out) {
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

}  // namespace

extern "C" BRAID_EXPORT ncclResult_t braidCommSetWireType(ncclComm_t comm, ncclDataType_t type) try {
  Result r = checkComm(comm, "braidCommSetWireType");
  WireType wire = WireType::None;
  if (r.ok()) r = wireTypeOf(type, "braidCommSetWireType", &wire);
  if (!r.ok()) return report(r);
  comm->settings.wireType = wire;
  return ncclSuccess;
} BRAID_API_CATCH(braidCommSetWireType)

extern "C" BRAID_EXPORT ncclResult_t braidWireRoundTrip(const float* values, float* out, size_t count,
                                                        ncclDataType_t type) try {
  WireType wire = WireType::None;
  Result r = wireTypeOf(type, "braidWireRoundTrip", &wire);
  if (r.ok() && count > 0 && (values == nullptr || out == nullptr))
    r = fail(ncclInvalidArgument, "braidWireRoundTrip: values or out is NULL with count %zu", count);
  if (!r.ok()) return report(r);
  if (wire == WireType::None) {
    if (out != values && count > 0) memmove(out, values, count * sizeof(float));
    return ncclSuccess;
  }
  reduce::WirePiece p;
  p.wire = wire;
  p.src = values;
  p.dst = out;
  p.round = true;
  p.count = count;
  reduce::runWirePieceOnHost(p);
  return ncclSuccess;
} BRAID_API_CATCH(braidWireRoundTrip)

extern "C" BRAID_EXPORT ncclResult_t braidGetPrivateUniqueId(ncclUniqueId* uniqueId) try {
  if (uniqueId == nullptr) return report(fail(ncclInvalidArgument, "braidGetPrivateUniqueId: uniqueId is NULL"));
  return report(createPrivateUniqueId(uniqueId));
} BRAID_API_CATCH(braidGetPrivateUniqueId)

extern "C" BRAID_EXPORT ncclResult_t braidCommInitRankTimeout(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                                              int rank, ncclConfig_t* config, double seconds) try {
  if (!std::isfinite(seconds) || seconds <= 0)
    return report(fail(ncclInvalidArgument, "braidCommInitRankTimeout: timeout %g s is not a positive number",
                       seconds));
  return startInit(comm, nranks, commId, rank, config, "braidCommInitRankTimeout", seconds);
} BRAID_API_CATCH(braidCommInitRankTimeout)

// Frameworks ask it before they hand braid device memory.
extern "C" BRAID_EXPORT int braidSupportsDeviceBuffers(void) try {
  return braid::deviceBuffersSupported() ? 1 : 0;
} catch (...) { return -1; }
