// Error reporting of the API layer: the per-thread "last error" behind
// ncclGetLastError, the text of each result code, and braid's version string.
#include <braid.h>

#include <string>

#include "api/api_util.h"
#include "base/log.h"

#ifndef BRAID_VERSION
#define BRAID_VERSION "0.1.0"
#endif
#define BRAID_STRINGIFY_(x) #x
#define BRAID_STRINGIFY(x) BRAID_STRINGIFY_(x)

namespace braid::api {

namespace {

// Thread-local rather than per communicator: the failing call and the caller's
// ncclGetLastError run on the same thread, and other threads' failures must not
// overwrite the message in between.
std::string& threadLastError() {
  thread_local std::string message;
  return message;
}

const char* resultText(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled CUDA error: a CUDA call made by the library failed";
    case ncclSystemError:
      return "system error: a system call, the network or shared memory failed "
             "(ncclGetLastError tells which)";
    case ncclInternalError:
      return "internal error: the library reached a state it should not be in";
    case ncclInvalidArgument:
      return "invalid argument: a parameter of the call is out of range or NULL";
    case ncclInvalidUsage:
      return "invalid usage: the call is not allowed here (wrong order, state or "
             "configuration, or not supported)";
    case ncclRemoteError:
      return "remote error: a peer rank failed, exited or closed its connection";
    case ncclInProgress:
      return "operation in progress: poll ncclCommGetAsyncError until it completes";
    default:
      return "unknown result code";
  }
}

}  // namespace

ncclResult_t report(const Result& r) {
  // ncclInProgress is the normal answer of non-blocking calls, not a failure.
  if (r.ok() || r.code() == ncclInProgress) return r.code();
  std::string& last = threadLastError();
  last = r.message().empty() ? resultText(r.code()) : r.message();
  BRAID_WARN("%s", last.c_str());
  return r.code();
}

ncclResult_t reportException(const char* fn) {
  const Result r = currentExceptionResult(fn);
  try {
    return report(r);
  } catch (...) {
    return r.code();  // recording it needed memory too: the code alone
  }
}

ncclResult_t notSupported(const char* function, const char* why) {
  return report(fail(ncclInvalidUsage, "%s is not supported by braid %s: %s", function,
                     BRAID_VERSION, why));
}

const char* lastErrorMessage() { return threadLastError().c_str(); }

}  // namespace braid::api

BRAID_NCCL_API(const char*, ncclGetErrorString, ncclResult_t result) try {
  return braid::api::resultText(result);
} catch (...) { return "braid: internal error"; }

BRAID_NCCL_API(const char*, ncclGetLastError, ncclComm_t comm) try {
  return braid::api::lastErrorMessage();
} catch (...) { return "braid: internal error"; }

extern "C" BRAID_EXPORT const char* braidVersionString(void) try {
  return "braid " BRAID_VERSION " (NCCL API " BRAID_STRINGIFY(NCCL_MAJOR) "." BRAID_STRINGIFY(
      NCCL_MINOR) "." BRAID_STRINGIFY(NCCL_PATCH) ")";
} catch (...) { return "braid: internal error"; }
