// The call recorder of the fake CUDA runtime: which calls may synchronise the
// device, which tracked kernels are outstanding, and the violations (a
// synchronising call while one is). fake_runtime.cc calls checkSync() at the
// top of every call the list in recorder.cc names.
#pragma once

#include <cstdint>
#include <string>

namespace fakecuda {

// A synchronising call `call` is being made; `returnAddress` is the caller's
// (__builtin_return_address(0) of the API function), which names the object
// that called: braid's library or the application. Returns whether kernels
// were outstanding (a violation was recorded). `onlyBlocking`: count only
// kernels on blocking streams (work on the legacy default stream waits for
// those, not for kernels on non-blocking streams). `braidsOnly`: a call the
// application may make (it waits for work the application chose) counts
// only when braid makes it, or while an ExpectViolations lives (the
// recorder's self-test), or under BRAID_FAKECUDA_APP_CALLS=fail.
bool checkSync(const char* call, const void* returnAddress, bool onlyBlocking = false, bool braidsOnly = false);

// Whether any tracked kernel is outstanding (for cudaFree's choice to keep
// memory rather than free it under a running kernel).
bool launchesOutstanding();

}  // namespace fakecuda
