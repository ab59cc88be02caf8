// Memory that holds one interpreter FIFO (kernels/executor/fifo_view.h) and
// that both ends of a connection can reach. The receiving rank creates it (its
// slots live where it reads them) and sends blob() to the sender over the
// bootstrap; the sender opens the blob. Which provider a pair uses depends on
// where the executor runs (host threads or CUDA blocks) and on where the peer
// is (same process, same host):
//
//   host threads, same process    heap memory            (fifo_memory_host.cc)
//   host threads, same host       a POSIX shm segment    (fifo_memory_host.cc)
//   CUDA blocks, same process     device memory, pointer (transports/p2p/p2p_fifo_memory.cc)
//   CUDA blocks, same host        device memory, CUDA IPC handle
//
// No provider reaches ranks on other hosts: each end keeps its own FIFO and
// the engine's network bridge moves the messages (net_bridge.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/result.h"
#include "kernels/executor/fifo_view.h"

namespace braid {
namespace lanes {

// One FIFO's memory, created here or opened from a peer's blob; released (or
// unmapped) on destruction.
class FifoMemory {
 public:
  virtual ~FifoMemory() = default;
  // The FIFO's first byte as this rank's executor addresses it (a device
  // pointer for the CUDA providers).
  virtual char* base() const = 0;
  // What the peer passes to FifoMemoryProvider::open (empty for opened memory).
  virtual std::string blob() const = 0;
};

class FifoMemoryProvider {
 public:
  virtual ~FifoMemoryProvider() = default;
  virtual const char* name() const = 0;
  // Allocates layout.totalBytes and writes initFifoImage(layout, base) into it
  // before returning, so the peer never sees uninitialised counters or flags.
  virtual Result create(const exec::FifoLayout& layout, uint64_t base, std::unique_ptr<FifoMemory>* out) = 0;
  // Maps a peer's FIFO of `bytes` (its layout's totalBytes) from its blob.
  virtual Result open(const std::string& blob, uint64_t bytes, std::unique_ptr<FifoMemory>* out) = 0;
};

// Host threads of one process: plain heap memory; the blob carries the
// address and this process's id, so a blob from another process is refused.
std::unique_ptr<FifoMemoryProvider> makeHeapFifoProvider();

// Host threads of processes on one host: a POSIX shm segment per FIFO; the
// name is unlinked once the peer opened it (or at destruction).
std::unique_ptr<FifoMemoryProvider> makeShmFifoProvider();

}  // namespace lanes
}  // namespace braid
