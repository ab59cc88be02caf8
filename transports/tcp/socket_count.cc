#include "transports/tcp/socket_count.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "base/env.h"
#include "base/log.h"
#include "transports/tcp/tcp_wire.h"

namespace braid::tcp {
namespace {

bool isLoopback(const PeerInfo& info) {
  sockaddr_storage a;
  memcpy(&a, info.tcpAddr, sizeof(a));
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (a.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
    return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr) != 0;
  }
  return false;
}

int clampSockets(int64_t n, const char* source) {
  if (n >= 1 && n <= tcp::kMaxSockets) return static_cast<int>(n);
  int clamped = n < 1 ? 1 : tcp::kMaxSockets;
  BRAID_WARN("tcp: %s asks for %lld sockets per connection; using %d (1..%d allowed)", source,
             static_cast<long long>(n), clamped, tcp::kMaxSockets);
  return clamped;
}

}  // namespace

int tcpSocketsFor(const transports::ConnectRequest& req) {
  if (envIsSet("BRAID_TCP_SOCKETS"))
    return clampSockets(envInt("BRAID_TCP_SOCKETS", 1), "BRAID_TCP_SOCKETS");
  if (envIsSet("NCCL_SOCKET_NTHREADS") || envIsSet("NCCL_NSOCKS_PERTHREAD")) {
    // braid has no proxy threads: only the product, the socket count, matters.
    int64_t threads = envInt("NCCL_SOCKET_NTHREADS", 1);
    int64_t perThread = envInt("NCCL_NSOCKS_PERTHREAD", 1);
    if (threads < 1) threads = 1;
    if (perThread < 1) perThread = 1;
    // Both are small in any sane setting; cap before multiplying.
    if (threads > tcp::kMaxSockets) threads = tcp::kMaxSockets + 1;
    if (perThread > tcp::kMaxSockets) perThread = tcp::kMaxSockets + 1;
    return clampSockets(threads * perThread, "NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD");
  }
  bool sameHost = req.self.hostHash == req.peer.hostHash || isLoopback(req.self);
  return sameHost ? kTcpSocketsSameHost : kTcpSocketsCrossHost;
}

}  // namespace braid::tcp
