// Transport between processes on one host through POSIX shared memory: the
// receiver owns a segment holding the FIFO and the sender writes slots in place.
#pragma once

#include <memory>

#include "transports/fifo_memory.h"
#include "transports/transport.h"

namespace braid::shm {

// canConnect: same hostHash and shmDomain, different processId, and
// NCCL_SHM_DISABLE not set to 1 (read when the transport is made).
// listen() creates and fully reserves the segment (a small /dev/shm fails
// there, with the size needed); accept() waits for the sender to map it and
// then unlinks the name, so nothing is left in /dev/shm whatever happens next.
std::unique_ptr<transports::Transport> makeShmTransport();

// Engine FIFOs of host threads of processes on one host: a POSIX shm segment
// per FIFO; the name is unlinked once the peer opened it (or at destruction).
std::unique_ptr<transports::FifoMemoryProvider> makeShmFifoProvider();

}  // namespace braid::shm
