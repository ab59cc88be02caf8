// Version, groups, user reduction ops, memory helpers and buffer registration.
#include <cstdlib>
#include <cstring>

#include "api/api_util.h"
#include "core/comm_registry.h"
#include "core/group.h"
#include "engine/comm.h"
#include "engine/device/device.h"
#include "reduce/host_reduce.h"

using namespace braid;

BRAID_NCCL_API(ncclResult_t, ncclGetVersion, int* version) try {
  if (version == nullptr) return braid::api::report(fail(ncclInvalidArgument, "ncclGetVersion: version is NULL"));
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
} BRAID_API_CATCH(ncclGetVersion)

BRAID_NCCL_API(ncclResult_t, ncclGroupStart) try {
  braid::core::groupStart();
  return ncclSuccess;
} BRAID_API_CATCH(ncclGroupStart)

BRAID_NCCL_API(ncclResult_t, ncclGroupEnd) try { return braid::api::report(braid::core::groupEnd()); }
BRAID_API_CATCH(ncclGroupEnd)

// NCCL_SIM_INFO_INITIALIZER's magic: a struct that was not initialised from it
// is refused rather than half trusted.
constexpr unsigned kSimInfoMagic = 0x74685283;

BRAID_NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) try {
  float micros = 0;
  // The group ends (its collectives dropped) even when simInfo is bad, so that
  // a caller who checks the error is not left inside a group.
  Result r = braid::core::groupSimulateEnd(&micros);
  if (simInfo == nullptr || simInfo->magic != kSimInfoMagic || simInfo->size < sizeof(ncclSimInfo_t))
    return braid::api::report(fail(ncclInvalidArgument,
                                   "ncclGroupSimulateEnd: simInfo must be non-NULL and initialised with "
                                   "NCCL_SIM_INFO_INITIALIZER"));
  if (r.ok()) simInfo->estimatedTime = micros;
  return braid::api::report(r);
} BRAID_API_CATCH(ncclGroupSimulateEnd)

BRAID_NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar,
               ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm) try {
  Result r = braid::core::checkUsableComm(comm, "ncclRedOpCreatePreMulSum");
  if (r.ok() && (op == nullptr || scalar == nullptr))
    r = fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: op and scalar must not be NULL");
  if (r.ok() && (static_cast<int>(datatype) < 0 || datatype >= ncclNumTypes))
    r = fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: datatype %d is invalid", static_cast<int>(datatype));
  if (r.ok() && residence != ncclScalarHostImmediate && residence != ncclScalarDevice)
    r = fail(ncclInvalidArgument, "ncclRedOpCreatePreMulSum: residence %d is invalid", static_cast<int>(residence));
  if (!r.ok()) return braid::api::report(r);
  braid::engine::UserRedOp u;
  u.live = true;
  u.type = datatype;
  u.residence = residence;
  if (residence == ncclScalarHostImmediate)
    memcpy(u.scalar, scalar, braid::reduce::typeSize(datatype));
  else u.scalarPtr = scalar;
  size_t slot = 0;
  while (slot < comm->userOps.size() && comm->userOps[slot].live) ++slot;
  if (slot == comm->userOps.size()) comm->userOps.push_back(u);
  else comm->userOps[slot] = u;
  *op = static_cast<ncclRedOp_t>(ncclNumOps + static_cast<int>(slot));
  return ncclSuccess;
} BRAID_API_CATCH(ncclRedOpCreatePreMulSum)

BRAID_NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) try {
  Result r = braid::core::checkComm(comm, "ncclRedOpDestroy");
  const int slot = static_cast<int>(op) - ncclNumOps;
  if (r.ok() && (slot < 0 || slot >= static_cast<int>(comm->userOps.size()) || !comm->userOps[slot].live))
    r = fail(ncclInvalidArgument, "ncclRedOpDestroy: op %d was not created on this communicator "
             "(or was destroyed already)", static_cast<int>(op));
  if (!r.ok()) return braid::api::report(r);
  comm->userOps[slot].live = false;
  return ncclSuccess;
} BRAID_API_CATCH(ncclRedOpDestroy)

// Device memory where CUDA has a device, else host memory
// (device::allocateCommMemory).
BRAID_NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) try {
  if (ptr == nullptr) return braid::api::report(fail(ncclInvalidArgument, "ncclMemAlloc: ptr is NULL"));
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  return braid::api::report(braid::device::allocateCommMemory(ptr, size));
} BRAID_API_CATCH(ncclMemAlloc)

BRAID_NCCL_API(ncclResult_t, ncclMemFree, void* ptr) try {
  if (ptr == nullptr) return ncclSuccess;
  return braid::api::report(braid::device::freeCommMemory(ptr));
} BRAID_API_CATCH(ncclMemFree)

namespace {
struct Registration {
  void* buff;
  size_t size;
};
}  // namespace

// Host buffers need no registration; the handle only records what was given.
BRAID_NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) try {
  Result r = braid::core::checkComm(comm, "ncclCommRegister");
  if (r.ok() && (handle == nullptr || (buff == nullptr && size > 0)))
    r = fail(ncclInvalidArgument, "ncclCommRegister: buff and handle must not be NULL");
  if (!r.ok()) return braid::api::report(r);
  *handle = std::make_unique<Registration>(Registration{buff, size}).release();
  return ncclSuccess;
} BRAID_API_CATCH(ncclCommRegister)

BRAID_NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) try {
  Result r = braid::core::checkComm(comm, "ncclCommDeregister");
  if (r.ok() && handle == nullptr) r = fail(ncclInvalidArgument, "ncclCommDeregister: handle is NULL");
  if (!r.ok()) return braid::api::report(r);
  std::unique_ptr<Registration> owned(static_cast<Registration*>(handle));
  return ncclSuccess;
} BRAID_API_CATCH(ncclCommDeregister)
