// Frees that may wait for the whole device (cudaFree, cudaFreeHost,
// cudaIpcCloseMemHandle: CUDA documents them as implicitly synchronising)
// must not run while one of braid's kernels may be waiting for host work: the
// free would wait for that kernel, and the kernel for a thread the free may
// hold up (issue 16). braid counts its outstanding kernels in the process
// (stream-wait and plan kernels whose end it has not seen yet); memory
// released while any is outstanding is kept, and freed by the first later
// check that finds none (a communicator's calls and its destruction check).
// CUDA builds only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <shared_mutex>

namespace braid {

// Held while a thread enqueues braid kernels and counts them outstanding:
// no free runs between the launch and the count.
std::shared_lock<std::shared_mutex> holdQuietFrees();
// Kernels started (delta > 0) or seen ended (delta < 0).
void addOutstandingKernels(int64_t delta);

// Now when no kernel of braid's is outstanding and no thread is launching
// one, else later (never waits).
void freeHostWhenQuiet(void* p);               // cudaFreeHost
void freeDeviceWhenQuiet(void* p, int device);  // cudaFree
void closeIpcWhenQuiet(void* p, int device);    // cudaIpcCloseMemHandle

// Runs the kept frees if no kernel is outstanding and no thread is launching
// (cheap when none is kept; never waits).
void freeDeferredIfQuiet();
// How many frees are kept (tests, logs).
size_t deferredFrees();

}  // namespace braid
