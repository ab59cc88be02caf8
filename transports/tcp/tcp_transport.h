// Transport between any two ranks over TCP (loopback included).
#pragma once

#include <memory>

#include "transports/transport.h"

namespace braid {

// canConnect: always. listen() opens a listening socket on the host address of
// req.self.tcpAddr (IPv4 or IPv6, ephemeral port) and puts that address and a
// random nonce in the blob; connect() connects and sends a hello carrying the
// nonce; accept() takes connections until one presents it, dropping (with a
// warning) any that do not. The data path is non-blocking: progress() on
// either side moves bytes; a lost peer is an ncclRemoteError naming it.
std::unique_ptr<Transport> makeTcpTransport();

}  // namespace braid
