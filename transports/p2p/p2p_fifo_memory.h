// The P2P transport: FIFOs of the plan interpreter in the device memory of
// one CUDA device (transports/fifo_memory.h). The receiving rank
// allocates them on its GPU; a sender in the same process uses the pointer
// (with peer access when its GPU differs), a sender in another process of the
// host maps it through a CUDA IPC handle. CUDA builds only
// (src/engine/device/device.cmake leaves this folder out of host-only builds).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"
#include "transports/fifo_memory.h"

namespace braid::p2p {

// Every FIFO the provider creates lives on `device`, and every FIFO it opens
// is addressed from `device` (the GPU whose kernels will use it). Creating the
// provider makes no CUDA call.
std::unique_ptr<transports::FifoMemoryProvider> makeCudaFifoProvider(int device);

// FIFOs for peers in this process only, carved from one device allocation of
// `arenaBytes` made now (a cudaMalloc later, when a peer's kernel may already
// wait, could hold the whole device); when the arena is full, one cudaMalloc
// per FIFO as makeCudaFifoProvider does. Carved FIFOs live as long as the
// provider. Their blobs carry no IPC handle (another process cannot open
// them: it gets an error saying so).
Result makeCudaArenaFifoProvider(int device, uint64_t arenaBytes, std::unique_ptr<transports::FifoMemoryProvider>* out);

// What a CUDA FIFO's blob carries; exposed for its tests.
struct CudaFifoBlob {
  int32_t pid = 0;            // the creating process
  uint64_t processToken = 0;  // random per process: a pid reused in another pid namespace is no match
  int32_t device = -1;        // the creator's ordinal of the FIFO's GPU
  uint64_t address = 0;       // the FIFO's device pointer in the creating process
  uint64_t bytes = 0;         // the allocation's size
  int32_t ipcError = 0;       // cudaSuccess, or why cudaIpcGetMemHandle failed (handle unusable)
  cudaIpcMemHandle_t handle{};
};

Blob encodeCudaFifoBlob(const CudaFifoBlob& b);

// Checks size, magic, version and fields; ncclInvalidArgument naming what is
// wrong otherwise.
Result decodeCudaFifoBlob(const Blob& blob, CudaFifoBlob* out);

// This process's identity as blobs record it.
int32_t cudaFifoPid();
uint64_t cudaFifoProcessToken();

}  // namespace braid::p2p
