// Where the lanes of a CUDA kernel keep their FIFOs and Ports: device memory
// of one GPU (FIFOs from transports/p2p, shared by pointer or CUDA IPC).
// CUDA builds only.
#pragma once

#include <memory>

#include "engine/lanes/port_table.h"

namespace braid {

std::unique_ptr<lanes::LaneMemory> makeCudaLaneMemory(int device);

}  // namespace braid
