// Transport between ranks of one process (thread ranks, tests, and a rank
// talking to itself): the FIFO is plain heap memory shared by both sides.
#pragma once

#include <memory>

#include "transports/fifo_memory.h"
#include "transports/transport.h"

namespace braid::inproc {

// canConnect: both ranks in this process (equal PeerInfo::processId), including
// self == peer. The blob names a FIFO registered in this process; the FIFO is
// jointly owned by both connections, so either may be destroyed first. The
// endpoint must outlive the sender's connect() (accept() waits for it); a blob
// whose endpoint is gone fails cleanly instead of touching freed memory.
std::unique_ptr<transports::Transport> makeInprocTransport();

// Engine FIFOs of host threads of one process: heap memory; the blob carries
// the address and this process's id, so a blob from another process is refused.
std::unique_ptr<transports::FifoMemoryProvider> makeHeapFifoProvider();

}  // namespace braid::inproc
