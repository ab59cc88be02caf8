#include "base/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "base/log.h"

namespace braid {

int msUntil(Deadline deadline, int cap) {
  auto now = Clock::now();
  if (deadline <= now) return 0;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
  // Round up so a wait that ends just before the deadline does not spin.
  return static_cast<int>(std::min<int64_t>(cap, left + 1));
}

socklen_t addrLength(const sockaddr_storage& addr) {
  switch (addr.ss_family) {
    case AF_INET: return sizeof(sockaddr_in);
    case AF_INET6: return sizeof(sockaddr_in6);
    default: return 0;
  }
}

std::string hostToString(const sockaddr_storage& addr) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(addr).sin_addr, buf, sizeof(buf));
  } else if (addr.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr, buf, sizeof(buf));
  } else {
    return "<unknown family " + std::to_string(addr.ss_family) + ">";
  }
  return buf;
}

std::string addrToString(const sockaddr_storage& addr) {
  std::string host = hostToString(addr);
  if (addr.ss_family == AF_INET) return host + ":" + std::to_string(addrPort(addr));
  if (addr.ss_family == AF_INET6) return "[" + host + "]:" + std::to_string(addrPort(addr));
  return host;
}

bool isLoopback(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) {
    uint32_t a = ntohl(reinterpret_cast<const sockaddr_in&>(addr).sin_addr.s_addr);
    return (a >> 24) == 127;
  }
  if (addr.ss_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a)) return a.s6_addr[12] == 127;
  }
  return false;
}

uint16_t addrPort(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  return 0;
}

void setAddrPort(sockaddr_storage* addr, uint16_t port) {
  if (addr->ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(addr)->sin_port = htons(port);
  if (addr->ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(addr)->sin6_port = htons(port);
}

Result parseHostPort(const std::string& text, int family, sockaddr_storage* out) {
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return fail(ncclInvalidArgument, "address '%s' has no ']:<port>' after the IPv6 host",
                  text.c_str());
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return fail(ncclInvalidArgument,
                  "address '%s' is not <host>:<port> (use [<ipv6>]:<port> for IPv6)",
                  text.c_str());
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  char* end = nullptr;
  long portNum = strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || portNum <= 0 || portNum > 65535)
    return fail(ncclInvalidArgument, "address '%s' has an invalid port '%s' (want 1-65535)",
                text.c_str(), port.c_str());

  addrinfo hints{};
  hints.ai_family = family;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr)
    return fail(ncclInvalidArgument, "cannot resolve host '%s' of address '%s': %s", host.c_str(),
                text.c_str(), gai_strerror(rc));
  // The first answer of the wanted family; getaddrinfo already orders by preference.
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> guard(res, freeaddrinfo);
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    *out = sockaddr_storage{};
    memcpy(out, ai->ai_addr, ai->ai_addrlen);
    setAddrPort(out, static_cast<uint16_t>(portNum));
    return Result::success();
  }
  return fail(ncclInvalidArgument, "host '%s' of address '%s' has no IPv4/IPv6 address",
              host.c_str(), text.c_str());
}

namespace {

Result newSocket(int family, UniqueFd* out) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return systemFail("socket(%s) failed", family == AF_INET6 ? "AF_INET6" : "AF_INET");
  *out = UniqueFd(fd);
  return Result::success();
}

void setNoDelay(const UniqueFd& s) {
  int one = 1;
  // Bootstrap messages are small and latency-bound; a failure only costs speed.
  (void)setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

bool retryableConnectError(int err) {
  return err == ECONNREFUSED || err == ETIMEDOUT || err == ENETUNREACH || err == EHOSTUNREACH ||
         err == ECONNRESET || err == EAGAIN || err == EADDRNOTAVAIL || err == ECONNABORTED;
}

}  // namespace

Result listenOn(const sockaddr_storage& addr, bool reuseAddr, UniqueFd* out,
                sockaddr_storage* boundAddr) {
  if (addrLength(addr) == 0)
    return fail(ncclInternalError, "cannot listen on %s", addrToString(addr).c_str());
  UniqueFd s;
  BRAID_TRY(newSocket(addr.ss_family, &s));
  if (reuseAddr) {
    int one = 1;
    if (setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
      return systemFail("setsockopt(SO_REUSEADDR) on %s", addrToString(addr).c_str());
  }
  if (::bind(s.get(), reinterpret_cast<const sockaddr*>(&addr), addrLength(addr)) != 0)
    return systemFail("cannot bind a listening socket to %s (is the address on this host and the "
                      "port free?)",
                      addrToString(addr).c_str());
  if (::listen(s.get(), SOMAXCONN) != 0)
    return systemFail("listen() on %s", addrToString(addr).c_str());
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  if (getsockname(s.get(), reinterpret_cast<sockaddr*>(&bound), &len) != 0)
    return systemFail("getsockname() on %s", addrToString(addr).c_str());
  if (boundAddr) *boundAddr = bound;
  *out = std::move(s);
  return Result::success();
}

Result acceptOne(const UniqueFd& listener, UniqueFd* out, sockaddr_storage* peer) {
  sockaddr_storage from{};
  socklen_t len = sizeof(from);
  for (;;) {
    int fd = ::accept4(listener.get(), reinterpret_cast<sockaddr*>(&from), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      *out = UniqueFd(fd);
      setNoDelay(*out);
      if (peer) *peer = from;
      return Result::success();
    }
    if (errno == EINTR) continue;
    // A connection that was reset while queued is not our failure.
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED || errno == EPROTO) {
      *out = UniqueFd();
      return Result::success();
    }
    return systemFail("accept() on the bootstrap listening socket");
  }
}

Result connectWithRetry(const sockaddr_storage& addr, Deadline deadline, const AbortFlag* abort,
                        UniqueFd* out) {
  if (addrLength(addr) == 0)
    return fail(ncclInvalidArgument, "cannot connect to %s", addrToString(addr).c_str());
  auto backoff = std::chrono::milliseconds(5);
  int lastErr = 0;
  int attempts = 0;
  for (;;) {
    if (abort && abort->load(std::memory_order_relaxed))
      return fail(ncclRemoteError, "connecting to %s was aborted", addrToString(addr).c_str());
    ++attempts;
    UniqueFd s;
    BRAID_TRY(newSocket(addr.ss_family, &s));
    int rc = ::connect(s.get(), reinterpret_cast<const sockaddr*>(&addr), addrLength(addr));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS || err == EINTR) {
      // Wait for the handshake in slices so abort and deadline are honoured.
      err = ETIMEDOUT;
      while (!(abort && abort->load(std::memory_order_relaxed))) {
        pollfd p{s.get(), POLLOUT, 0};
        int n = ::poll(&p, 1, msUntil(deadline));
        if (n > 0) {
          socklen_t len = sizeof(err);
          if (getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
          break;
        }
        if (n < 0 && errno != EINTR) {
          err = errno;
          break;
        }
        if (Clock::now() >= deadline) break;
      }
    }
    if (err == 0) {
      setNoDelay(s);
      *out = std::move(s);
      return Result::success();
    }
    lastErr = err;
    if (!retryableConnectError(err) || Clock::now() >= deadline) break;
    auto wake = std::min<Deadline>(deadline, Clock::now() + backoff);
    std::this_thread::sleep_until(wake);
    backoff = std::min<std::chrono::milliseconds>(backoff * 2, std::chrono::milliseconds(200));
  }
  errno = lastErr;
  return systemFail("could not connect to %s after %d attempt(s)", addrToString(addr).c_str(),
                    attempts);
}

std::string describeIo(IoStatus status, const IoProgress& progress, size_t total) {
  std::string where = " after " + std::to_string(progress.done) + " of " +
                      std::to_string(total) + " bytes";
  switch (status) {
    case IoStatus::kDone: return "done";
    case IoStatus::kTimeout: return "timed out" + where;
    case IoStatus::kClosed: return "connection closed by the peer" + where;
    case IoStatus::kAborted: return "aborted" + where;
    case IoStatus::kError: return std::string(strerror(progress.err)) + where;
  }
  return "unknown";
}

namespace {

// Shared wait loop of sendExact/recvExact: `step` tries to move bytes and
// returns false when the socket would block.
template <typename Step>
IoStatus transferExact(const UniqueFd& s, short events, size_t bytes, Deadline deadline,
                       const AbortFlag* abort, IoProgress* progress, Step step) {
  while (progress->done < bytes) {
    if (abort && abort->load(std::memory_order_relaxed)) return IoStatus::kAborted;
    ssize_t n = step(progress->done);
    if (n > 0) {
      progress->done += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return IoStatus::kClosed;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      progress->err = errno;
      return (errno == ECONNRESET || errno == EPIPE) ? IoStatus::kClosed : IoStatus::kError;
    }
    if (Clock::now() >= deadline) return IoStatus::kTimeout;
    pollfd p{s.get(), events, 0};
    if (::poll(&p, 1, msUntil(deadline)) < 0 && errno != EINTR) {
      progress->err = errno;
      return IoStatus::kError;
    }
  }
  return IoStatus::kDone;
}

}  // namespace

IoStatus sendExact(const UniqueFd& s, const void* data, size_t bytes, Deadline deadline,
                   const AbortFlag* abort, IoProgress* progress) {
  const char* p = static_cast<const char*>(data);
  return transferExact(s, POLLOUT, bytes, deadline, abort, progress, [&](size_t done) {
    return ::send(s.get(), p + done, bytes - done, MSG_NOSIGNAL | MSG_DONTWAIT);
  });
}

IoStatus recvExact(const UniqueFd& s, void* data, size_t bytes, Deadline deadline,
                   const AbortFlag* abort, IoProgress* progress) {
  char* p = static_cast<char*>(data);
  return transferExact(s, POLLIN, bytes, deadline, abort, progress,
                       [&](size_t done) { return readSome(s, p + done, bytes - done); });
}

ssize_t readSome(const UniqueFd& s, void* data, size_t bytes) {
  for (;;) {
    ssize_t n = ::recv(s.get(), data, bytes, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EWOULDBLOCK) errno = EAGAIN;
    return n;
  }
}

}  // namespace braid
