// What this rank tells the others about itself.
#pragma once

#include <sys/socket.h>

#include "transports/transport.h"

namespace braid {

// Host identity: BRAID_HOSTID when set, else hostname + boot id + network
// namespace, so that ranks in different network namespaces count as different
// hosts (the several-hosts tests rely on it).
uint64_t localHostHash();

PeerInfo makeLocalPeerInfo(int rank, int cudaDev, const sockaddr_storage& tcpAddr);

}  // namespace braid
