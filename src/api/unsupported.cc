// Entry points braid exports so that programs and libraries linked against
// NVIDIA's NCCL 2.28+ load and run, but whose features braid does not provide
// yet. Each one fails with ncclInvalidUsage and names itself in
// ncclGetLastError, so a caller that probes for a feature falls back cleanly.
#include <cstdint>

#include "api/api_util.h"
#include "base/log.h"

namespace {

constexpr const char* kNoWindows =
    "memory windows (symmetric registration) are not implemented; use "
    "ncclCommRegister or unregistered buffers";
constexpr const char* kNoOneSided =
    "one-sided operations on memory windows are not implemented; use ncclSend/ncclRecv";
constexpr const char* kNoDeviceApi =
    "braid does not provide NCCL's device API (nccl_device.h, device communicators, "
    "teams, barriers, LL all-to-all); use the host collectives";
constexpr const char* kNoSuspend =
    "suspending communicator memory is not implemented; keep the communicator "
    "or destroy it";

}  // namespace

// ---- NCCL 2.28 host API declared in nccl.h ------------------------------------------

BRAID_NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size,
               ncclWindow_t* win, int winFlags) try {
  return braid::api::notSupported("ncclCommWindowRegister", kNoWindows);
} BRAID_API_CATCH(ncclCommWindowRegister)

BRAID_NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) try {
  return braid::api::notSupported("ncclCommWindowDeregister", kNoWindows);
} BRAID_API_CATCH(ncclCommWindowDeregister)

BRAID_NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks,
               int myrank, int nId, ncclUniqueId* commIds, ncclConfig_t* config) try {
  return braid::api::notSupported("ncclCommInitRankScalable",
                                  "initialisation from several unique ids is not implemented; use "
                                  "ncclCommInitRankConfig with one id");
} BRAID_API_CATCH(ncclCommInitRankScalable)

// NCCL declares these deprecated; defining them must not warn.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
BRAID_NCCL_API(void, ncclResetDebugInit, void) try {
  BRAID_WARN(
      "ncclResetDebugInit: braid reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE "
      "once, at first use; changes made since are ignored");
} catch (...) { }
#pragma GCC diagnostic pop

// Not in any header: NCCL's own tests call it to reload logging settings.
extern "C" void ncclResetDebugInitInternal(void);
extern "C" BRAID_EXPORT void ncclResetDebugInitInternal(void) try {
  BRAID_WARN("ncclResetDebugInitInternal: braid reads its logging settings once; ignored");
} catch (...) {
}

// ---- host API of later NCCL releases (not in braid's 2.27 header) -----------------
// Prototypes as those releases declare them. Enum and descriptor-pointer
// parameters are passed as int and void*, which the C ABI treats the same.

extern "C" {
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config);
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* uniqueId);
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t ncclCommMemStats(ncclComm_t comm, int stat, uint64_t* value);
ncclResult_t ncclPutSignal(const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t ncclWaitSignal(int nDesc, void* signalDescs, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr);
}

BRAID_NCCL_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks,
               const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
               ncclConfig_t* config) try {
  return braid::api::notSupported("ncclCommGrow",
                                  "growing a communicator is not implemented; create a new one with ncclCommInitRank");
} BRAID_API_CATCH(ncclCommGrow)

BRAID_NCCL_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId* uniqueId) try {
  return braid::api::notSupported("ncclCommGetUniqueId",
                                  "ids derived from a communicator are not implemented; use ncclGetUniqueId");
} BRAID_API_CATCH(ncclCommGetUniqueId)

BRAID_NCCL_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags) try {
  return braid::api::notSupported("ncclCommSuspend", kNoSuspend);
} BRAID_API_CATCH(ncclCommSuspend)

BRAID_NCCL_API(ncclResult_t, ncclCommResume, ncclComm_t comm) try {
  return braid::api::notSupported("ncclCommResume", kNoSuspend);
} BRAID_API_CATCH(ncclCommResume)

BRAID_NCCL_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, int stat, uint64_t* value) try {
  return braid::api::notSupported("ncclCommMemStats", "communicator memory statistics are not implemented");
} BRAID_API_CATCH(ncclCommMemStats)

BRAID_NCCL_API(ncclResult_t, ncclPutSignal, const void* localbuff, size_t count,
               ncclDataType_t datatype, int peer, ncclWindow_t peerWin, size_t peerWinOffset,
               int sigIdx, int ctx, unsigned int flags, ncclComm_t comm, cudaStream_t stream) try {
  return braid::api::notSupported("ncclPutSignal", kNoOneSided);
} BRAID_API_CATCH(ncclPutSignal)

BRAID_NCCL_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags,
               ncclComm_t comm, cudaStream_t stream) try {
  return braid::api::notSupported("ncclSignal", kNoOneSided);
} BRAID_API_CATCH(ncclSignal)

BRAID_NCCL_API(ncclResult_t, ncclWaitSignal, int nDesc, void* signalDescs, ncclComm_t comm,
               cudaStream_t stream) try {
  return braid::api::notSupported("ncclWaitSignal", kNoOneSided);
} BRAID_API_CATCH(ncclWaitSignal)

BRAID_NCCL_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win,
               void** outUserPtr) try {
  return braid::api::notSupported("ncclWinGetUserPtr", kNoWindows);
} BRAID_API_CATCH(ncclWinGetUserPtr)

// ---- host side of NCCL 2.28's device API (nccl_device.h) ----------------------------
// Only pointers to these types cross the boundary, except the team, which is
// passed and returned by value and so must keep NCCL's layout.

struct ncclDevComm;
struct ncclDevCommRequirements;
struct ncclDevResourceRequirements;
struct ncclLsaBarrierHandle;
struct ncclGinBarrierHandle;
struct ncclLLA2AHandle;

namespace braid::api {
struct DeviceTeam {  // NCCL's ncclTeam_t
  int nRanks;
  int rank;
  int stride;
};
static_assert(sizeof(DeviceTeam) == 3 * sizeof(int), "ncclTeam_t is three ints");
}  // namespace braid::api

extern "C" {
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const ncclDevCommRequirements* reqs,
                               ncclDevComm* outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const ncclDevComm* devComm);
braid::api::DeviceTeam ncclTeamWorld(ncclComm_t comm);
braid::api::DeviceTeam ncclTeamLsa(ncclComm_t comm);
braid::api::DeviceTeam ncclTeamRail(ncclComm_t comm);
int ncclTeamRankToWorld(ncclComm_t comm, braid::api::DeviceTeam team, int rank);
int ncclTeamRankToLsa(ncclComm_t comm, braid::api::DeviceTeam team, int rank);
ncclResult_t ncclLsaBarrierCreateRequirement(braid::api::DeviceTeam team, int nBarriers,
                                             ncclLsaBarrierHandle* outHandle, ncclDevResourceRequirements* outReq);
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, braid::api::DeviceTeam team, int nBarriers,
                                             ncclGinBarrierHandle* outHandle, ncclDevResourceRequirements* outReq);
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle* outHandle,
                                        ncclDevResourceRequirements* outReq);
}

namespace {

// For the functions that cannot return a result code: record why, and let the
// zero team / -1 rank / 0 slots they return make the caller's next step fail.
void deviceApiMissing(const char* function) { (void)braid::api::notSupported(function, kNoDeviceApi); }

}  // namespace

BRAID_NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm,
               const ncclDevCommRequirements* reqs, ncclDevComm* outDevComm) try {
  return braid::api::notSupported("ncclDevCommCreate", kNoDeviceApi);
} BRAID_API_CATCH(ncclDevCommCreate)

BRAID_NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const ncclDevComm* devComm) try {
  return braid::api::notSupported("ncclDevCommDestroy", kNoDeviceApi);
} BRAID_API_CATCH(ncclDevCommDestroy)

BRAID_NCCL_API(braid::api::DeviceTeam, ncclTeamWorld, ncclComm_t comm) try {
  deviceApiMissing("ncclTeamWorld");
  return braid::api::DeviceTeam{};
} catch (...) {
  return braid::api::DeviceTeam{};
}

BRAID_NCCL_API(braid::api::DeviceTeam, ncclTeamLsa, ncclComm_t comm) try {
  deviceApiMissing("ncclTeamLsa");
  return braid::api::DeviceTeam{};
} catch (...) {
  return braid::api::DeviceTeam{};
}

BRAID_NCCL_API(braid::api::DeviceTeam, ncclTeamRail, ncclComm_t comm) try {
  deviceApiMissing("ncclTeamRail");
  return braid::api::DeviceTeam{};
} catch (...) {
  return braid::api::DeviceTeam{};
}

BRAID_NCCL_API(int, ncclTeamRankToWorld, ncclComm_t comm, braid::api::DeviceTeam team, int rank) try {
  deviceApiMissing("ncclTeamRankToWorld");
  return -1;
} catch (...) {
  return -1;
}

BRAID_NCCL_API(int, ncclTeamRankToLsa, ncclComm_t comm, braid::api::DeviceTeam team, int rank) try {
  deviceApiMissing("ncclTeamRankToLsa");
  return -1;
} catch (...) {
  return -1;
}

BRAID_NCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement, braid::api::DeviceTeam team, int nBarriers,
               ncclLsaBarrierHandle* outHandle, ncclDevResourceRequirements* outReq)
try {
  return braid::api::notSupported("ncclLsaBarrierCreateRequirement", kNoDeviceApi);
}
BRAID_API_CATCH(ncclLsaBarrierCreateRequirement)

BRAID_NCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, braid::api::DeviceTeam team,
               int nBarriers, ncclGinBarrierHandle* outHandle, ncclDevResourceRequirements* outReq)
try {
  return braid::api::notSupported("ncclGinBarrierCreateRequirement", kNoDeviceApi);
}
BRAID_API_CATCH(ncclGinBarrierCreateRequirement)

BRAID_NCCL_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize) try {
  deviceApiMissing("ncclLLA2ACalcSlots");
  return 0;
} catch (...) { return -1; }

BRAID_NCCL_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots,
               ncclLLA2AHandle* outHandle, ncclDevResourceRequirements* outReq) try {
  return braid::api::notSupported("ncclLLA2ACreateRequirement", kNoDeviceApi);
} BRAID_API_CATCH(ncclLLA2ACreateRequirement)
