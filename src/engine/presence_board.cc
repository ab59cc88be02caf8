#include "engine/presence_board.h"

#include <cstring>
#include <new>

#include "base/log.h"

namespace braid::engine {

namespace {

constexpr const char* kPurpose = "a rank's presence slot";
constexpr size_t kMostPeersMapped = 63;

bool sharesDevShm(const PeerInfo& a, const PeerInfo& b) {
  return a.hostHash == b.hostHash && a.shmDomain == b.shmDomain;
}

// The name a peer sent, if it is one (NUL-terminated within the field).
std::string nameOf(const PeerInfo& p) {
  const void* end = memchr(p.presenceName, '\0', sizeof(p.presenceName));
  return end ? std::string(p.presenceName) : std::string();
}

}  // namespace

Result PresenceBoard::create() {
  BRAID_TRY(shm::createShmSegment(sizeof(PresenceSlot), kPurpose, &name_, &own_));
  PresenceSlot* slot = new (own_.data()) PresenceSlot;
  markRunning(*slot, currentCpu());
  return Result::success();
}

void PresenceBoard::openPeers(const std::vector<PeerInfo>& peers, int self) {
  slots_.assign(peers.size(), nullptr);
  mapped_.clear();
  const auto mine = [&](size_t rank) {
    return int(rank) != self && !nameOf(peers[rank]).empty() && sharesDevShm(peers[rank], peers[size_t(self)]);
  };
  size_t wanted = 0;
  for (size_t rank = 0; rank < peers.size(); ++rank) wanted += mine(rank);
  // Ranks that are threads of one process map each other's slots: n ranks,
  // n*(n-1) mappings, against the kernel's 65530 per process.
  if (wanted > kMostPeersMapped) {
    BRAID_INFO(kLogShm, "rank %d: %zu peers on this host, more than the %zu whose presence slots a rank maps: "
               "waits poll without them", self, wanted, kMostPeersMapped);
    return;
  }
  mapped_.reserve(wanted);
  for (size_t rank = 0; rank < peers.size(); ++rank) {
    if (!mine(rank)) continue;
    const std::string name = nameOf(peers[rank]);
    shm::ShmMapping mapping;
    Result r = shm::openShmSegment(name, sizeof(PresenceSlot), kPurpose, &mapping);
    if (!r.ok()) {
      BRAID_INFO(kLogShm, "rank %d: no presence slot of rank %d (%s); waits on it poll as without one", self,
                 int(rank), r.message().c_str());
      continue;
    }
    slots_[rank] = static_cast<const PresenceSlot*>(mapping.data());
    mapped_.push_back(std::move(mapping));
  }
}

}  // namespace braid::engine
