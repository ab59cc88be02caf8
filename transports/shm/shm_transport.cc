#include "transports/shm/shm_transport.h"

#include <chrono>
#include <thread>
#include <vector>

#include "base/env.h"
#include "base/log.h"
#include "base/process_liveness.h"
#include "transports/shm/shm_segment.h"

namespace braid::shm {
namespace {

// Processes of one host: the engine's FIFOs between them are POSIX shm
// segments (shm_fifo_memory.cc), written and read in place, so there is
// nothing to connect; what is left to do is clean up after dead peers.
class ShmTransport final : public transports::Transport {
 public:
  ShmTransport() : disabled_(envInt("NCCL_SHM_DISABLE", 0) == 1) {
    if (disabled_) BRAID_INFO(kLogShm | kLogEnv, "NCCL_SHM_DISABLE=1: shared memory transport off");
  }

  const char* name() const override { return "shm"; }

  bool sharesMemory() const override { return true; }
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    return !disabled_ && self.hostHash == peer.hostHash && self.shmDomain == peer.shmDomain &&
           self.processId != peer.processId;
  }

  void cleanUpAfterDeadPeers(const PeerInfo& self, const std::vector<PeerInfo>& peers,
                             std::chrono::milliseconds patience) override {
    const auto until = std::chrono::steady_clock::now() + patience;
    std::vector<const PeerInfo*> alive;
    for (const PeerInfo& p : peers)
      if (p.shmDomain == self.shmDomain && p.processId != self.processId) alive.push_back(&p);
    for (;;) {
      for (size_t i = alive.size(); i-- > 0;) {
        if (!peerProcessGone(self, *alive[i])) continue;
        removeSegmentsOfProcess(alive[i]->pid);
        alive.erase(alive.begin() + static_cast<ptrdiff_t>(i));
      }
      if (alive.empty() || std::chrono::steady_clock::now() >= until) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

 private:
  bool disabled_;
};

}  // namespace

std::unique_ptr<transports::Transport> makeShmTransport() { return std::make_unique<ShmTransport>(); }

}  // namespace braid::shm
