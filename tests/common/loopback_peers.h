// Two ranks of one host, as the transport tests make them by hand: distinct
// processes (by processId) on loopback, and the request that connects them.
#ifndef BRAID_TESTS_COMMON_LOOPBACK_PEERS_H_
#define BRAID_TESTS_COMMON_LOOPBACK_PEERS_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "transports/transport.h"

namespace braidtest {

using braid::Clock;
using braid::transports::ConnectRequest;
using braid::PeerInfo;

// Host name "testhost<rank>": error messages name it.
inline PeerInfo makePeer(int rank, uint64_t processId, bool ipv6 = false) {
  PeerInfo p{};
  p.rank = rank;
  p.cudaDev = -1;
  p.hostHash = 0x1234;
  p.shmDomain = 0x5678;
  p.processId = processId;
  p.pid = getpid();
  snprintf(p.hostname, sizeof(p.hostname), "testhost%d", rank);
  if (ipv6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_loopback;
    memcpy(p.tcpAddr, &a, sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    memcpy(p.tcpAddr, &a, sizeof(a));
  }
  return p;
}

inline ConnectRequest makeRequest(const PeerInfo& self, const PeerInfo& peer, size_t slotBytes, int nslots,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  ConnectRequest r;
  r.self = self;
  r.peer = peer;
  r.slotBytes = slotBytes;
  r.nslots = nslots;
  r.deadline = Clock::now() + timeout;
  return r;
}

}  // namespace braidtest

#endif  // BRAID_TESTS_COMMON_LOOPBACK_PEERS_H_
