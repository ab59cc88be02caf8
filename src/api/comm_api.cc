// Entry points that create, query and destroy communicators.
#include <cstring>

#include "api/api_util.h"
#include "api/init_entry.h"
#include "base/log.h"
#include "core/comm_registry.h"
#include "core/group.h"
#include "core/init.h"
#include "engine/comm.h"
#include "engine/device/device.h"

namespace braid::api {
namespace {

Result checkInitArgs(ncclComm_t* out, int nranks, int rank, const char* fn) {
  if (out == nullptr) return fail(ncclInvalidArgument, "%s: comm output pointer is NULL", fn);
  if (nranks < 1) return fail(ncclInvalidArgument, "%s: nranks %d must be at least 1", fn, nranks);
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "%s: rank %d is out of range for %d ranks", fn, rank, nranks);
  return Result::success();
}

}  // namespace

ncclResult_t startInit(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                       const ncclConfig_t* config, const char* fn, double timeoutSeconds) {
  Result r = checkInitArgs(out, nranks, rank, fn);
  engine::CommSettings settings;
  if (r.ok()) r = core::makeCommSettings(config, &settings);
  if (r.ok() && timeoutSeconds > 0) settings.timeoutSeconds = timeoutSeconds;
  if (!r.ok()) {
    core::groupFail(r);
    return report(r);
  }
  bool inProgress = false;
  r = core::startCommunicator(id, nranks, rank, settings, out, &inProgress);
  return inProgress ? ncclInProgress : report(r);
}

}  // namespace braid::api

using namespace braid;

BRAID_NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) try {
  if (uniqueId == nullptr) return braid::api::report(fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL"));
  return braid::api::report(braid::bootstrap::createUniqueId(uniqueId));
} BRAID_API_CATCH(ncclGetUniqueId)

BRAID_NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) try {
  return braid::api::startInit(comm, nranks, commId, rank, nullptr, "ncclCommInitRank");
} BRAID_API_CATCH(ncclCommInitRank)

BRAID_NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId,
               int rank, ncclConfig_t* config) try {
  return braid::api::startInit(comm, nranks, commId, rank, config, "ncclCommInitRankConfig");
} BRAID_API_CATCH(ncclCommInitRankConfig)

BRAID_NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) try {
  if (comms == nullptr) return braid::api::report(fail(ncclInvalidArgument, "ncclCommInitAll: comms is NULL"));
  if (ndev < 1)
    return braid::api::report(fail(ncclInvalidArgument, "ncclCommInitAll: ndev %d must be at least 1", ndev));
  braid::engine::CommSettings settings;
  Result r = braid::core::makeCommSettings(nullptr, &settings);
  if (r.ok()) r = braid::core::initAllCommunicators(ndev, devlist, settings, comms);
  return braid::api::report(r);
} BRAID_API_CATCH(ncclCommInitAll)

BRAID_NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
               ncclConfig_t* config) try {
  if (newcomm == nullptr) return braid::api::report(fail(ncclInvalidArgument, "ncclCommSplit: newcomm is NULL"));
  Result r = braid::core::checkUsableComm(comm, "ncclCommSplit");
  braid::engine::CommSettings settings;
  if (r.ok()) {
    settings = comm->settings;
    if (config) r = braid::core::makeCommSettings(config, &settings);
  }
  // Device calls queued earlier use the parent's connections and bootstrap first.
  if (r.ok()) braid::device::drainDeviceWork(comm);
  if (r.ok()) r = braid::core::splitCommunicator(comm, color, key, settings, newcomm);
  return braid::api::report(r);
} BRAID_API_CATCH(ncclCommSplit)

BRAID_NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) try {
  Result r = braid::core::checkComm(comm, "ncclCommRevoke");
  if (r.ok() && revokeFlags != NCCL_REVOKE_DEFAULT)
    r = fail(ncclInvalidArgument, "ncclCommRevoke: revokeFlags %d is not NCCL_REVOKE_DEFAULT", revokeFlags);
  if (!r.ok()) return braid::api::report(r);
  braid::core::revokeCommunicator(comm);
  return ncclSuccess;
} BRAID_API_CATCH(ncclCommRevoke)

BRAID_NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
               ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) try {
  Result r = braid::core::checkComm(comm, "ncclCommShrink");
  if (r.ok() && newcomm == nullptr) r = fail(ncclInvalidArgument, "ncclCommShrink: newcomm is NULL");
  if (r.ok() && shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    r = fail(ncclInvalidArgument, "ncclCommShrink: shrinkFlags %d is neither NCCL_SHRINK_DEFAULT nor NCCL_SHRINK_ABORT",
             shrinkFlags);
  if (!r.ok()) return braid::api::report(r);
  *newcomm = nullptr;
  braid::core::settleDeviceWork(comm, shrinkFlags == NCCL_SHRINK_ABORT);
  braid::engine::CommSettings settings = comm->settings;
  if (config) r = braid::core::makeCommSettings(config, &settings);
  if (r.ok()) r = braid::core::shrinkCommunicator(comm, excludeRanksList, excludeRanksCount, settings, newcomm);
  return braid::api::report(r);
} BRAID_API_CATCH(ncclCommShrink)

BRAID_NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) try {
  Result r = braid::core::checkUsableComm(comm, "ncclCommFinalize");
  if (!r.ok()) return braid::api::report(r);
  // Operations on host memory complete before their call returns; those on
  // device memory have their host work done here.
  braid::device::drainDeviceWork(comm);
  comm->state.store(static_cast<int>(braid::engine::CommState::Finalized));
  return ncclSuccess;
} BRAID_API_CATCH(ncclCommFinalize)

BRAID_NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) try {
  if (comm == nullptr) return ncclSuccess;  // as NCCL: destroying NULL is a no-op
  Result r = braid::core::checkComm(comm, "ncclCommDestroy");
  if (!r.ok()) return braid::api::report(r);
  braid::core::destroyComm(comm);
  return ncclSuccess;
} BRAID_API_CATCH(ncclCommDestroy)

BRAID_NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) try {
  if (comm == nullptr) return ncclSuccess;
  Result r = braid::core::checkComm(comm, "ncclCommAbort");
  if (!r.ok()) return braid::api::report(r);
  braid::core::abortCommunicator(comm);
  return ncclSuccess;
} BRAID_API_CATCH(ncclCommAbort)

BRAID_NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) try {
  if (asyncError == nullptr)
    return braid::api::report(fail(ncclInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL"));
  Result r = braid::core::checkComm(comm, "ncclCommGetAsyncError");
  if (!r.ok()) return braid::api::report(r);
  *asyncError = comm->asyncError.load();
  // The failure behind an error found here (a device watch's, a kernel's)
  // is what ncclGetLastError says next.
  if (*asyncError != ncclSuccess && *asyncError != ncclInProgress) {
    const std::string failure = comm->failureText();
    if (!failure.empty()) (void)braid::api::report(Result(*asyncError, failure));
  }
  return ncclSuccess;
} BRAID_API_CATCH(ncclCommGetAsyncError)

BRAID_NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) try {
  if (count == nullptr) return braid::api::report(fail(ncclInvalidArgument, "ncclCommCount: count is NULL"));
  Result r = braid::core::checkComm(comm, "ncclCommCount");
  if (!r.ok()) return braid::api::report(r);
  *count = comm->nranks;
  return ncclSuccess;
} BRAID_API_CATCH(ncclCommCount)

BRAID_NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) try {
  if (device == nullptr) return braid::api::report(fail(ncclInvalidArgument, "ncclCommCuDevice: device is NULL"));
  Result r = braid::core::checkComm(comm, "ncclCommCuDevice");
  if (!r.ok()) return braid::api::report(r);
  *device = comm->cudaDev;
  return ncclSuccess;
} BRAID_API_CATCH(ncclCommCuDevice)

BRAID_NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) try {
  if (rank == nullptr) return braid::api::report(fail(ncclInvalidArgument, "ncclCommUserRank: rank is NULL"));
  Result r = braid::core::checkComm(comm, "ncclCommUserRank");
  if (!r.ok()) return braid::api::report(r);
  *rank = comm->rank;
  return ncclSuccess;
} BRAID_API_CATCH(ncclCommUserRank)
