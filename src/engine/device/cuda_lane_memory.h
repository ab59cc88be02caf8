// Where the lanes of a CUDA kernel keep their FIFOs and Ports: device memory
// of one GPU (FIFOs from transports/p2p, shared by pointer or CUDA IPC), and
// mapped pinned memory for FIFOs bridged to ranks on other hosts.
// CUDA builds only.
#pragma once

#include <memory>

#include "base/result.h"
#include "engine/lanes/port_table.h"

namespace braid::device {

std::unique_ptr<lanes::LaneMemory> makeCudaLaneMemory(int device);

// The same with its first slab of Ports, an arena of `arenaBytes` for the
// FIFOs of peers in this process and a reserve of `bridgedBytes` of mapped
// pinned memory for bridged FIFOs (CommSettings::deviceFifoArenaBytes)
// allocated now: made with the communicator, before any launch (a cudaMalloc
// or cudaHostAlloc when a peer's kernel may already wait could hold the
// device).
Result makeReservedCudaLaneMemory(int device, size_t arenaBytes, size_t bridgedBytes,
                                  std::unique_ptr<lanes::LaneMemory>* out);

}  // namespace braid::device
