// braid's extensions (include/braid.h): what NCCL's API has no word for but
// frameworks on top of braid need, such as a per-communicator timeout.
#include "braid.h"

#include <nccl.h>

#include <cmath>

#include "api/api_util.h"
#include "api/init_entry.h"
#include "bootstrap/bootstrap.h"
#include "core/comm_registry.h"
#include "engine/comm.h"
#include "engine/device/device.h"
#include "core/wire_type.h"

using namespace braid;

extern "C" BRAID_EXPORT ncclResult_t braidCommSetTimeout(ncclComm_t comm, double seconds) try {
  Result r = braid::core::checkComm(comm, "braidCommSetTimeout");
  if (r.ok() && (!std::isfinite(seconds) || seconds <= 0))
    r = fail(ncclInvalidArgument, "braidCommSetTimeout: timeout %g s is not a positive number", seconds);
  if (!r.ok()) return braid::api::report(r);
  comm->settings.timeoutSeconds = seconds;
  return ncclSuccess;
} BRAID_API_CATCH(braidCommSetTimeout)

extern "C" BRAID_EXPORT ncclResult_t braidCommSetReproducible(ncclComm_t comm, int on) try {
  Result r = braid::core::checkComm(comm, "braidCommSetReproducible");
  if (r.ok() && on != 0 && on != 1)
    r = fail(ncclInvalidArgument, "braidCommSetReproducible: on is %d; expected 1 (on) or 0 (off)", on);
  if (!r.ok()) return braid::api::report(r);
  comm->settings.reproducible = on == 1;
  return ncclSuccess;
} BRAID_API_CATCH(braidCommSetReproducible)

extern "C" BRAID_EXPORT ncclResult_t braidCommSetWireType(ncclComm_t comm, ncclDataType_t type) try {
  Result r = braid::core::checkComm(comm, "braidCommSetWireType");
  braid::reduce::WireType wire = braid::reduce::WireType::None;
  if (r.ok()) r = braid::core::wireTypeOfDatatype(type, "braidCommSetWireType", &wire);
  if (!r.ok()) return braid::api::report(r);
  comm->settings.wireType = wire;
  return ncclSuccess;
} BRAID_API_CATCH(braidCommSetWireType)

extern "C" BRAID_EXPORT ncclResult_t braidWireRoundTrip(const float* values, float* out, size_t count,
                                                        ncclDataType_t type) try {
  return braid::api::report(braid::core::wireRoundTrip(values, out, count, type));
} BRAID_API_CATCH(braidWireRoundTrip)

extern "C" BRAID_EXPORT ncclResult_t braidGetPrivateUniqueId(ncclUniqueId* uniqueId) try {
  if (uniqueId == nullptr)
    return braid::api::report(fail(ncclInvalidArgument, "braidGetPrivateUniqueId: uniqueId is NULL"));
  return braid::api::report(braid::bootstrap::createPrivateUniqueId(uniqueId));
} BRAID_API_CATCH(braidGetPrivateUniqueId)

extern "C" BRAID_EXPORT ncclResult_t braidCommInitRankTimeout(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                                              int rank, ncclConfig_t* config, double seconds) try {
  if (!std::isfinite(seconds) || seconds <= 0)
    return braid::api::report(
        fail(ncclInvalidArgument, "braidCommInitRankTimeout: timeout %g s is not a positive number", seconds));
  return braid::api::startInit(comm, nranks, commId, rank, config, "braidCommInitRankTimeout", seconds);
} BRAID_API_CATCH(braidCommInitRankTimeout)

// Frameworks ask it before they hand braid device memory.
extern "C" BRAID_EXPORT int braidSupportsDeviceBuffers(void) try {
  return braid::device::deviceBuffersSupported() ? 1 : 0;
} catch (...) { return -1; }
