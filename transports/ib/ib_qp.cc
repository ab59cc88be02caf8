#include "transports/ib/ib_qp.h"

#include <cerrno>
#include <cstring>

namespace braid::ib {

namespace {

// Retry settings: 7 is "retry for ever" for rnr_retry; timeout 18 is about 1 s
// (4.096 us * 2^18) per attempt, patient enough for a congested fabric.
constexpr uint8_t kTimeout = 18;
constexpr uint8_t kRetryCount = 7;
constexpr uint8_t kRnrRetry = 7;
constexpr uint8_t kMinRnrTimer = 12;

}  // namespace

IbvQpAttr qpInitAttr(const QpLocal& local, int* mask) {
  IbvQpAttr a;
  memset(&a, 0, sizeof(a));
  a.qpState = kQpsInit;
  a.pkeyIndex = 0;
  a.portNum = local.port;
  // The sender writes into the receiver's slots; nothing is ever read remotely.
  a.qpAccessFlags = kAccessRemoteWrite | kAccessLocalWrite;
  *mask = kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags;
  return a;
}

IbvQpAttr qpRtrAttr(const QpLocal& local, const IbConnInfo& remote, int* mask) {
  IbvQpAttr a;
  memset(&a, 0, sizeof(a));
  a.qpState = kQpsRtr;
  a.pathMtu = local.mtu < remote.mtu ? local.mtu : remote.mtu;
  a.destQpNum = remote.qpn;
  a.rqPsn = remote.psn;
  a.maxDestRdAtomic = 1;
  a.minRnrTimer = kMinRnrTimer;
  a.ahAttr.portNum = local.port;
  a.ahAttr.dlid = remote.lid;
  // RoCE has no LIDs: every packet carries a global route header to the GID.
  if (remote.linkLayer == kLinkEthernet) {
    a.ahAttr.isGlobal = 1;
    memcpy(a.ahAttr.grh.dgid.raw, remote.gid, sizeof(remote.gid));
    a.ahAttr.grh.sgidIndex = static_cast<uint8_t>(local.gidIndex);
    a.ahAttr.grh.hopLimit = 255;
  }
  *mask = kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn | kQpMaxDestRdAtomic |
          kQpMinRnrTimer;
  return a;
}

IbvQpAttr qpRtsAttr(const QpLocal& local, int* mask) {
  IbvQpAttr a;
  memset(&a, 0, sizeof(a));
  a.qpState = kQpsRts;
  a.sqPsn = local.psn;
  a.timeout = kTimeout;
  a.retryCnt = kRetryCount;
  a.rnrRetry = kRnrRetry;
  a.maxRdAtomic = 1;
  *mask = kQpState | kQpSqPsn | kQpTimeout | kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic;
  return a;
}

Result bringUpQp(const VerbsLibrary& lib, IbvQp* qp, const QpLocal& local,
                 const IbConnInfo& remote) {
  struct Step {
    const char* name;
    IbvQpAttr attr;
    int mask;
  } steps[3];
  steps[0].name = "INIT";
  steps[0].attr = qpInitAttr(local, &steps[0].mask);
  steps[1].name = "RTR";
  steps[1].attr = qpRtrAttr(local, remote, &steps[1].mask);
  steps[2].name = "RTS";
  steps[2].attr = qpRtsAttr(local, &steps[2].mask);
  for (auto& s : steps) {
    // ibv_modify_qp returns an errno value rather than setting errno.
    const int rc = lib.api().modifyQp(qp, &s.attr, s.mask);
    if (rc != 0)
      return fail(ncclSystemError, "ibv_modify_qp to %s failed: %s (remote QP %u, port %u)",
                  s.name, strerror(rc), remote.qpn, local.port);
  }
  return Result::success();
}

Result VerbsMrRegistrar::registerRange(uintptr_t addr, size_t bytes, void** handle,
                                       MrKeys* keys) {
  MemoryRegion mr;
  BRAID_TRY(regMr(lib_, pd_, reinterpret_cast<void*>(addr), bytes, access_, &mr));
  keys->lkey = mr.get()->lkey;
  keys->rkey = mr.get()->rkey;
  *handle = mr.release();  // the cache owns it from here and gives it back to deregister
  return Result::success();
}

void VerbsMrRegistrar::deregister(void* handle) {
  lib_->api().deregMr(static_cast<IbvMr*>(handle));
}

}  // namespace braid::ib
