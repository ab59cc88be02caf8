// How many sockets one TCP connection stripes its slots over. The receiver
// decides (listen() puts the count in the blob) and the sender follows, so the
// two ends can never disagree; see docs/transports.md for the measurements
// behind the defaults.
#pragma once

#include "transports/transport.h"

namespace braid::tcp {

// Sockets when no variable says otherwise: 1 between ranks on one host (or on
// a loopback address), where more sockets only add system calls; 4 across
// hosts, the best of 1/2/4 between network namespaces (docs/performance.md).
constexpr int kTcpSocketsSameHost = 1;
constexpr int kTcpSocketsCrossHost = 4;

// BRAID_TCP_SOCKETS if set, else NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD
// if either is set (an unset or non-positive one counts as 1), else the
// default above for `req`'s pair; always within 1..tcp::kMaxSockets (values
// outside are clamped with a warning). Read at every call, not cached.
int tcpSocketsFor(const transports::ConnectRequest& req);

}  // namespace braid::tcp
