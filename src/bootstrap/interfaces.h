// Choice of the local address the bootstrap (and the TCP transport) listens on.
// The policy is a pure function over a list of interfaces so that it can be
// tested with invented lists; a thin wrapper feeds it the machine's interfaces
// and the environment (NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY).
#pragma once

#include <net/if.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include "base/result.h"

namespace braid::bootstrap {

struct NetInterface {
  std::string name;
  sockaddr_storage addr{};     // port 0
  sockaddr_storage netmask{};  // same family as addr
  unsigned flags = 0;          // IFF_UP, IFF_LOOPBACK, ...
};

struct InterfaceQuery {
  // NCCL_SOCKET_IFNAME syntax: comma list of name prefixes; a leading '^'
  // excludes the listed ones; a leading '=' requires exact names ("^=" both).
  // Empty: the default policy.
  std::string ifname;
  int family = AF_UNSPEC;                  // AF_INET / AF_INET6 restrict the choice
  const sockaddr_storage* root = nullptr;  // the root's address when known
};

// Picks one interface from `all` (in the given order):
//  - only interfaces that are up, of the requested family, with an IPv4 or
//    non-link-local IPv6 address are considered;
//  - with an include list: the matching one whose subnet holds the root, else the
//    first match; no match is an error listing the interfaces that exist;
//  - otherwise (default, or after '^' exclusion): loopback if the root is on
//    loopback; else the interface whose subnet holds the root; else the first
//    non-loopback interface that is not a bridge for containers/VMs (docker*,
//    virbr*), preferring the root's address family; else loopback.
Result selectInterface(const std::vector<NetInterface>& all, const InterfaceQuery& query,
                       NetInterface* out);

// True when `name` is selected by an NCCL_SOCKET_IFNAME-style `spec`.
bool interfaceNameMatches(const std::string& spec, const std::string& name);

// The machine's IPv4/IPv6 interface addresses (getifaddrs order).
Result listInterfaces(std::vector<NetInterface>* out);

// NCCL_SOCKET_FAMILY as AF_INET/AF_INET6, AF_UNSPEC when unset or unknown.
int socketFamilyFromEnv();

// The local address for a job whose root is at `root` (may be null when the
// root is this process and not yet bound), honouring the environment. Port 0.
Result chooseLocalAddress(const sockaddr_storage* root, sockaddr_storage* out,
                          std::string* ifname = nullptr);

}  // namespace braid::bootstrap
