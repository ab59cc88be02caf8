#include "transports/inproc/inproc_transport.h"

namespace braid::inproc {
namespace {

// Ranks of one process (ncclCommInitAll, thread ranks, a rank and itself): the
// engine's FIFOs between them are heap memory (heap_fifo_memory.cc), written
// and read in place, so there is nothing to connect.
class InprocTransport final : public transports::Transport {
 public:
  const char* name() const override { return "inproc"; }
  bool sharesMemory() const override { return true; }
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    return self.processId == peer.processId;
  }
};

}  // namespace

std::unique_ptr<transports::Transport> makeInprocTransport() { return std::make_unique<InprocTransport>(); }

}  // namespace braid::inproc
