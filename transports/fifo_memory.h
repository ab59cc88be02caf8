// Memory that holds one engine FIFO (its layout: kernels/executor/fifo_view.h)
// and that both ends of a connection can reach. Transports provide it; the
// engine lays the FIFO out in it. The receiving rank creates it (its
// slots live where it reads them) and sends blob() to the sender over the
// bootstrap; the sender opens the blob. Which provider a pair uses depends on
// where the executor runs (host threads or CUDA blocks) and on where the peer
// is (same process, same host):
//
//   host threads, same process    heap memory            (transports/inproc)
//   host threads, same host       a POSIX shm segment    (transports/shm)
//   CUDA blocks, same process     device memory, pointer (transports/p2p)
//   CUDA blocks, same host        device memory, CUDA IPC handle
//
// No provider reaches ranks on other hosts: each end keeps its own FIFO and
// the engine's network bridge moves the messages (engine/lanes/net_bridge.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/blob.h"
#include "base/result.h"

namespace braid::transports {

// One FIFO's memory, created here or opened from a peer's blob; released (or
// unmapped) on destruction.
class FifoMemory {
 public:
  virtual ~FifoMemory() = default;
  // The FIFO's first byte as this rank's executor addresses it (a device
  // pointer for the CUDA providers).
  virtual char* base() const = 0;
  // What the peer passes to FifoMemoryProvider::open (empty for opened memory).
  virtual Blob blob() const = 0;
};

// Writes a new FIFO's image into `image` (host memory of the FIFO's size).
using FifoImageWriter = std::function<void(char* image)>;

class FifoMemoryProvider {
 public:
  virtual ~FifoMemoryProvider() = default;
  virtual const char* name() const = 0;
  // Allocates `bytes` and has `writeImage` write the FIFO's first contents
  // (through host memory) before returning, so the peer never sees
  // uninitialised counters or flags.
  virtual Result create(uint64_t bytes, const FifoImageWriter& writeImage, std::unique_ptr<FifoMemory>* out) = 0;
  // Maps a peer's FIFO of `bytes` from its blob.
  virtual Result open(const Blob& blob, uint64_t bytes, std::unique_ptr<FifoMemory>* out) = 0;
};

}  // namespace braid::transports
