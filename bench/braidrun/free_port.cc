#include "braidrun/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>

namespace braid::run {
namespace {

// Closes the socket on every path.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

// Below this, ports belong to well-known and registered services.
constexpr int kLowestCandidate = 10000;
// A range smaller than this is too easy for two jobs to collide in.
constexpr int kFewestCandidates = 1000;
// Binds tried before giving up: a machine with this many of the candidates
// taken has a problem of its own.
constexpr int kMostTries = 200;

// Binds a socket to `port` on `address` (0: the kernel's choice) and returns
// the port bound, or 0 with *error set; `*busy` says the port was in use. The
// socket is closed again: only rank 0 listens on it. SO_REUSEADDR as rank 0's
// listener has it, so that a port whose last connection waits out TIME_WAIT
// counts as free, as it is for rank 0.
int tryBind(const sockaddr_in& base, int port, bool* busy, std::string* error) {
  sockaddr_in sa = base;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  *busy = false;
  Fd sock{socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (sock.fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return 0;
  }
  int one = 1;
  (void)setsockopt(sock.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(sock.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    *busy = errno == EADDRINUSE;
    *error = "bind to port " + std::to_string(port) + ": " + std::strerror(errno);
    return 0;
  }
  socklen_t len = sizeof sa;
  if (getsockname(sock.fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    *error = std::string("getsockname: ") + std::strerror(errno);
    return 0;
  }
  return ntohs(sa.sin_port);
}

}  // namespace

PortRange ephemeralPorts() {
  PortRange range{32768, 60999};
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    int first = 0, last = 0;
    if (std::fscanf(f, "%d %d", &first, &last) == 2 && first > 0 && first <= last) range = {first, last};
    std::fclose(f);
  }
  return range;
}

PortRange portsBelowEphemeral(PortRange ephemeral) {
  const PortRange below{kLowestCandidate, ephemeral.first - 1};
  return below.size() >= kFewestCandidates ? below : PortRange{};
}

int pickFreePort(const std::string& address, PortRange candidates, std::string* error) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) {
    *error = "'" + address + "' is not an IPv4 address";
    return 0;
  }
  bool busy = false;
  if (candidates.size() == 0) return tryBind(sa, 0, &busy, error);
  std::minstd_rand random(static_cast<unsigned>(getpid()) ^
                          static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
  const int start = static_cast<int>(random() % static_cast<unsigned>(candidates.size()));
  const int tries = std::min(candidates.size(), kMostTries);
  for (int i = 0; i < tries; ++i) {
    const int port = candidates.first + (start + i) % candidates.size();
    if (const int bound = tryBind(sa, port, &busy, error)) return bound;
    if (!busy) return 0;
  }
  *error = "the " + std::to_string(tries) + " ports tried of " + std::to_string(candidates.first) + "-" +
           std::to_string(candidates.last) + " are all in use";
  return 0;
}

int pickFreePort(const std::string& address, std::string* error) {
  return pickFreePort(address, portsBelowEphemeral(ephemeralPorts()), error);
}

}  // namespace braid::run
