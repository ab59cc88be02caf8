// The communicators alive in this process, and the checks every API call
// makes on the handle it was given.
#pragma once

#include "base/result.h"
#include "engine/comm.h"

namespace braid::core {

// Communicators alive in this process. The API checks every handle against it so
// that a destroyed or never-initialised communicator is an error, not a crash.
void registerComm(ncclComm* comm);
void unregisterComm(ncclComm* comm);
bool isLiveComm(const ncclComm* comm);

// Validates a handle passed by the user; `what` names the calling function.
Result checkComm(const ncclComm* comm, const char* what);
// As checkComm, and waits for a nonblocking init to finish; fails if the
// communicator is in error, finalized or aborted.
Result checkUsableComm(ncclComm* comm, const char* what);

}  // namespace braid::core
