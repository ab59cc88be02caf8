// Whether a peer process on this host still runs. Shared memory has no
// connection that breaks when a process dies, so a rank waiting on a peer asks
// the kernel instead.
#pragma once

#include <cstdint>
#include <string>

#include "base/peer_info.h"
#include "base/result.h"

namespace braid {

// True only when it is certain that `peer`'s process is gone: same host and pid
// namespace as `self`, and /proc/<pid> is missing, a zombie, or a different
// process that reused the pid. Anything uncertain answers false.
bool peerProcessGone(const PeerInfo& self, const PeerInfo& peer);

// Success while `peer` may be alive; once it is certainly gone, ncclRemoteError
// "rank P (pid X on host H) exited or was killed while <what>".
Result checkPeerProcess(const PeerInfo& self, const PeerInfo& peer, const std::string& what);

// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot; with the
// pid it names a process even across pid reuse); 0 when unreadable.
uint64_t processStartTime(int pid);

}  // namespace braid
