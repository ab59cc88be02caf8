// Socket plumbing for the TCP transport: addresses, a listening socket, a
// connect and a send that respect a connect request's deadline and abort flag.
#pragma once

#include <sys/socket.h>

#include <string>

#include "base/result.h"
#include "base/unique_fd.h"
#include "transports/transport.h"

namespace braid::tcp {

// Reads PeerInfo::tcpAddr (a sockaddr_storage; AF_INET or AF_INET6), or fails.
Result peerAddress(const PeerInfo& info, sockaddr_storage* out);

// Data-path options: no Nagle delay, and socket buffers large enough to keep a
// whole FIFO in flight.
void setSocketBuffers(int fd, size_t bytes);
void setNoDelay(int fd);

// Non-blocking listening socket on `addr`'s host address and an ephemeral port;
// `bound` receives the actual address.
Result listenOn(const sockaddr_storage& addr, size_t bufferBytes, UniqueFd* fd,
                sockaddr_storage* bound);

// Connects a non-blocking socket to `addr`, retrying refused attempts, until
// the request's deadline or abort.
Result connectTo(const sockaddr_storage& addr, const transports::ConnectRequest& req, size_t bufferBytes,
                 const std::string& peer, UniqueFd* out);

// Writes all `bytes` to a non-blocking socket, waiting as the request allows.
Result sendAll(int fd, const void* data, size_t bytes, const transports::ConnectRequest& req, const std::string& peer);

}  // namespace braid::tcp
