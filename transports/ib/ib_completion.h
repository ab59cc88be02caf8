// Turning a failed work completion into an error that names the peer.
#pragma once

#include <string>

#include "base/result.h"
#include "transports/ib/ib_verbs_abi.h"

namespace braid::ib {

// "IBV_WC_REM_ACCESS_ERR" for 10; "IBV_WC_STATUS_<n>" for a value this build
// does not know (libibverbs' own ibv_wc_status_str is not relied on: braid
// resolves as few symbols as it can).
std::string wcStatusName(int status);

// True for statuses the peer or the fabric caused (the responder refused the
// access, no acknowledgement came, the peer had no receive posted): those are
// ncclRemoteError; local ones (protection, length, QP state) are ncclSystemError.
bool wcStatusIsRemote(int status);

// "<what> to|from <peer> failed: IBV_WC_... (status n, vendor error 0x..)",
// with the code wcStatusIsRemote chooses.
Result completionError(const IbvWc& wc, const char* what, const std::string& peer);

}  // namespace braid::ib
