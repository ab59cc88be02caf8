#include "braidrun/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace braid::run {
namespace {

// Closes the socket on every path.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

int pickFreePort(const std::string& address, std::string* error) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  if (inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) {
    *error = "'" + address + "' is not an IPv4 address";
    return 0;
  }
  Fd sock{socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (sock.fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return 0;
  }
  if (bind(sock.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    *error = "bind to " + address + ": " + std::strerror(errno);
    return 0;
  }
  socklen_t len = sizeof sa;
  if (getsockname(sock.fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    *error = std::string("getsockname: ") + std::strerror(errno);
    return 0;
  }
  return ntohs(sa.sin_port);
}

}  // namespace braid::run
