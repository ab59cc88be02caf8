// Transport between any two ranks over TCP (loopback included).
#pragma once

#include <memory>

#include "transports/transport.h"

namespace braid::tcp {

// canConnect: always. listen() opens a listening socket on the host address of
// req.self.tcpAddr (IPv4 or IPv6, ephemeral port) and puts that address, a
// random nonce and the connection's socket count (tcpSocketsFor: the receiver
// decides) in the blob; connect() opens that many sockets, each sending a
// hello with the nonce and its index; accept() takes connections until every
// index has presented it, dropping (with a warning) any that do not. The data
// path is non-blocking: progress() on either side moves bytes, large slots
// striped over the sockets; a lost peer, on any socket, is an ncclRemoteError
// naming it.
std::unique_ptr<transports::Transport> makeTcpTransport();

}  // namespace braid::tcp
