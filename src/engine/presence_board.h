// The presence slots (base/presence.h) of a communicator's ranks on this
// host: this rank's own, in a /dev/shm segment it makes before the ranks
// exchange their PeerInfo (which carries the segment's name), and those of
// the peers that share its /dev/shm, mapped right after. The name is removed
// once every rank has mapped what it needs (after the next exchange of init),
// so that from then on /dev/shm keeps nothing of it, however a rank ends.
//
// Only a hint: a rank without a slot (no /dev/shm, NCCL_SHM_DISABLE=1, a peer
// on another host) is seen as possibly running, and its waiters poll as
// they always did.
#pragma once

#include <string>
#include <vector>

#include "base/peer_info.h"
#include "base/presence.h"
#include "base/result.h"
#include "transports/shm/shm_segment.h"

namespace braid::engine {

class PresenceBoard {
 public:
  // Makes this rank's slot, marked running on the current CPU.
  [[nodiscard]] Result create();
  // The segment's name for PeerInfo::presenceName; empty without a slot.
  const std::string& name() const { return name_.str(); }

  // Maps the slots of the peers that share this rank's /dev/shm; a slot that
  // cannot be mapped (its rank failed, or removed it) is left out.
  void openPeers(const std::vector<PeerInfo>& peers, int self);
  // Removes the segment's name: call once every peer has run openPeers.
  void removeName() { name_.unlink(); }

  // This rank's slot, or null.
  PresenceSlot* self() const { return own_.data() ? static_cast<PresenceSlot*>(own_.data()) : nullptr; }
  // A peer's slot, or null when it has none this rank can read.
  const PresenceSlot* of(int rank) const {
    return rank >= 0 && size_t(rank) < slots_.size() ? slots_[size_t(rank)] : nullptr;
  }

 private:
  shm::ShmName name_;
  shm::ShmMapping own_;
  std::vector<shm::ShmMapping> mapped_;
  std::vector<const PresenceSlot*> slots_;  // per rank
};

}  // namespace braid::engine
