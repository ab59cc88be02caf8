// FIFOs in pinned host memory mapped into the GPU's address space
// (cudaHostAlloc, mapped and portable): the one memory that a plan kernel's
// lanes and a host thread both address at one pointer (unified addressing).
// A FIFO with a rank on another host lives here on each end, and the
// engine's network bridge moves its messages between it and a socket
// (engine/lanes/net_bridge.h, bridge_pump.h). No peer opens these: open()
// fails. CUDA builds only, like the rest of this folder.
#pragma once

#include <memory>

#include "base/result.h"
#include "transports/fifo_memory.h"

namespace braid::p2p {

// One cudaHostAlloc per FIFO, freed when no kernel of braid's is outstanding
// (base/cuda_quiet_free.h). Creating the provider makes no CUDA call.
std::unique_ptr<transports::FifoMemoryProvider> makeMappedHostFifoProvider();

// FIFOs carved from one cudaHostAlloc of `reserveBytes` made now (the call
// may wait for every kernel running on the device, so it is made before a
// peer's kernel can wait on this rank); past the reserve, one per FIFO as
// above.
Result makeReservedMappedHostFifoProvider(uint64_t reserveBytes,
                                          std::unique_ptr<transports::FifoMemoryProvider>* out);

}  // namespace braid::p2p
