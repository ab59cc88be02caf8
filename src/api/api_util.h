// Helpers shared by the exported entry points in src/api/.
#pragma once

#include <nccl.h>

#include "base/result.h"

#define BRAID_EXPORT __attribute__((visibility("default")))

// Declares an exported NCCL entry point `name` and its profiling alias `p<name>`.
// The nccl* symbol is weak so a profiler can interpose it and call pnccl*.
// Use as: BRAID_NCCL_API(ncclResult_t, ncclFoo, int a) try { ...body... }
//         BRAID_API_CATCH(ncclFoo)
// (tests/api/check_entry_points.py holds every entry point to it).
#define BRAID_NCCL_API(ret, name, ...)                                             \
  extern "C" BRAID_EXPORT ret p##name(__VA_ARGS__) __attribute__((alias(#name))); \
  extern "C" BRAID_EXPORT __attribute__((weak)) ret name(__VA_ARGS__)

// Closes an entry point written `BRAID_NCCL_API(ncclResult_t, name, ...) try {
// ... } BRAID_API_CATCH(name)`: no C++ exception crosses the C API.
#define BRAID_API_CATCH(name)                    \
  catch (...) {                                  \
    return ::braid::api::reportException(#name); \
  }

namespace braid::api {

// The error an exception escaping entry point `fn` becomes (call it in a catch
// block): std::bad_alloc is ncclSystemError, anything else ncclInternalError
// with its text; recorded and logged like report().
ncclResult_t reportException(const char* fn);

// Records r's message as this thread's last error (ncclGetLastError), logs it at
// WARN, and returns its code. Success passes through untouched.
ncclResult_t report(const Result& r);

// ncclInvalidUsage with "<function> is not supported by braid <version>: <why>".
ncclResult_t notSupported(const char* function, const char* why);

// The message ncclGetLastError returns for this thread ("" when none).
const char* lastErrorMessage();

}  // namespace braid::api
