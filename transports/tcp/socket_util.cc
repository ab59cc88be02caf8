#include "transports/tcp/socket_util.h"

#include <fcntl.h>
#include <nccl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/socket.h"
#include "transports/common/connect_util.h"

namespace braid::tcp {

Result peerAddress(const PeerInfo& info, sockaddr_storage* out) {
  static_assert(sizeof(info.tcpAddr) >= sizeof(sockaddr_storage), "tcpAddr too small");
  memcpy(out, info.tcpAddr, sizeof(sockaddr_storage));
  if (out->ss_family != AF_INET && out->ss_family != AF_INET6)
    return fail(ncclInvalidArgument, "%s has no usable TCP address (address family %d)",
                common::describePeer(info).c_str(), out->ss_family);
  return Result::success();
}

void setSocketBuffers(int fd, size_t bytes) {
  // The kernel caps these at net.core.{w,r}mem_max; a cap is fine, failure too.
  int v = static_cast<int>(std::min<size_t>(bytes, 1u << 30));
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Result listenOn(const sockaddr_storage& addr, size_t bufferBytes, UniqueFd* fd,
                sockaddr_storage* bound) {
  sockaddr_storage local = addr;
  // The address names an interface; its port (if any) belongs to someone else.
  if (local.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&local)->sin_port = 0;
  else reinterpret_cast<sockaddr_in6*>(&local)->sin6_port = 0;

  UniqueFd s(socket(local.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return systemFail("cannot create a TCP socket");
  // Buffers set before listen() are inherited by accepted sockets and size the
  // window scale negotiated in the handshake.
  if (bufferBytes) setSocketBuffers(s.get(), bufferBytes);
  if (bind(s.get(), reinterpret_cast<sockaddr*>(&local), addrLength(local)) != 0)
    return systemFail("cannot bind a TCP socket to %s", addrToString(local).c_str());
  // Room for every socket of a connection (tcp::kMaxSockets) plus strangers:
  // the sender connects them all before the receiver accepts any.
  if (::listen(s.get(), 128) != 0)
    return systemFail("cannot listen on %s", addrToString(local).c_str());
  socklen_t len = sizeof(*bound);
  if (getsockname(s.get(), reinterpret_cast<sockaddr*>(bound), &len) != 0)
    return systemFail("getsockname on a listening TCP socket");
  *fd = std::move(s);
  return Result::success();
}

Result connectTo(const sockaddr_storage& addr, const transports::ConnectRequest& req, size_t bufferBytes,
                 const std::string& peer, UniqueFd* out) {
  const std::string where = addrToString(addr);
  const std::string what = peer + " to accept a TCP connection at " + where;
  int round = 0;
  for (;;) {
    BRAID_TRY(common::checkWait(req, what));
    UniqueFd s(socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s.valid()) return systemFail("cannot create a TCP socket to connect to %s", peer.c_str());
    if (bufferBytes) setSocketBuffers(s.get(), bufferBytes);
    int rc = ::connect(s.get(), reinterpret_cast<const sockaddr*>(&addr), addrLength(addr));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS || err == EINTR) {
      pollfd p{s.get(), POLLOUT, 0};
      for (;;) {
        BRAID_TRY(common::checkWait(req, what));
        int n = poll(&p, 1, common::pollTimeoutMs(req));
        if (n > 0) break;
        if (n < 0 && errno != EINTR) return systemFail("poll while connecting to %s", peer.c_str());
      }
      socklen_t len = sizeof(err);
      if (getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
    if (err == 0) {
      *out = std::move(s);
      return Result::success();
    }
    // A full accept backlog or a listener not ready yet: try again until the deadline.
    if (err != ECONNREFUSED && err != ETIMEDOUT && err != EAGAIN) {
      errno = err;
      return systemFail("cannot connect to %s at %s (a firewall, or the wrong interface in "
                        "NCCL_SOCKET_IFNAME?)", peer.c_str(), where.c_str());
    }
    BRAID_INFO(kLogNet, "tcp: connect to %s at %s: %s; retrying", peer.c_str(), where.c_str(),
               strerror(err));
    common::backoff(&round);
  }
}

Result sendAll(int fd, const void* data, size_t bytes, const transports::ConnectRequest& req, const std::string& peer) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return Result(ncclRemoteError,
                    systemFail("lost the TCP connection to %s during set-up", peer.c_str()).message());
    BRAID_TRY(common::checkWait(req, peer + " to take the TCP hello"));
    pollfd pfd{fd, POLLOUT, 0};
    poll(&pfd, 1, common::pollTimeoutMs(req));
  }
  return Result::success();
}

}  // namespace braid::tcp
