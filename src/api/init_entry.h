// The one way into communicator creation, shared by NCCL's init calls and
// braid's extension that bounds creation with its own timeout.
#pragma once

#include <nccl.h>

namespace braid::api {

// Blocking: joins now (or at the end of the open group). Nonblocking: joins on a
// thread of its own and reports ncclInProgress until ncclCommGetAsyncError says
// otherwise. timeoutSeconds > 0 replaces BRAID_TIMEOUT for this communicator,
// creation included; 0 keeps the configured one.
ncclResult_t startInit(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank,
                       const ncclConfig_t* config, const char* fn, double timeoutSeconds = 0);

}  // namespace braid::api
