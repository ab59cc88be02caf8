#include "transports/ib/ib_completion.h"

namespace braid::ib {

std::string wcStatusName(int status) {
  static const char* const kNames[kWcStatusCount] = {
      "SUCCESS",         "LOC_LEN_ERR",       "LOC_QP_OP_ERR",     "LOC_EEC_OP_ERR",
      "LOC_PROT_ERR",    "WR_FLUSH_ERR",      "MW_BIND_ERR",       "BAD_RESP_ERR",
      "LOC_ACCESS_ERR",  "REM_INV_REQ_ERR",   "REM_ACCESS_ERR",    "REM_OP_ERR",
      "RETRY_EXC_ERR",   "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR",  "REM_INV_RD_REQ_ERR",
      "REM_ABORT_ERR",   "INV_EECN_ERR",      "INV_EEC_STATE_ERR", "FATAL_ERR",
      "RESP_TIMEOUT_ERR", "GENERAL_ERR",      "TM_ERR",            "TM_RNDV_INCOMPLETE"};
  if (status >= 0 && status < kWcStatusCount) return std::string("IBV_WC_") + kNames[status];
  return "IBV_WC_STATUS_" + std::to_string(status);
}

bool wcStatusIsRemote(int status) {
  switch (status) {
    case kWcRemInvReqErr:
    case kWcRemAccessErr:
    case kWcRemOpErr:
    case kWcRetryExcErr:
    case kWcRnrRetryExcErr:
    case kWcRemAbortErr:
    case kWcRespTimeoutErr:
      return true;
    default:
      return false;
  }
}

Result completionError(const IbvWc& wc, const char* what, const std::string& peer) {
  const ncclResult_t code = wcStatusIsRemote(wc.status) ? ncclRemoteError : ncclSystemError;
  const char* hint = wc.status == kWcRetryExcErr || wc.status == kWcRnrRetryExcErr
                         ? ": the peer's queue pair is gone or unreachable (process exited, link down?)"
                     : wc.status == kWcRemAccessErr
                         ? ": the peer refused the write (wrong key or range: mixed builds?)"
                     : wc.status == kWcWrFlushErr
                         ? ": the queue pair had already failed"
                         : "";
  return fail(code, "ib: %s %s failed: %s (status %d, vendor error 0x%x)%s", what, peer.c_str(),
              wcStatusName(wc.status).c_str(), wc.status, wc.vendorErr, hint);
}

}  // namespace braid::ib
