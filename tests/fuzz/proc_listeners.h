// The TCP ports another process of this user listens on, read from /proc: the
// socket inodes among /proc/<pid>/fd joined with the LISTEN entries of
// /proc/<pid>/net/tcp{,6}. Lets a test find a rank's private listening ports
// (bootstrap, TCP transport) from outside, the way a stranger would scan them.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace proclisten {

struct Listener {
  unsigned long inode = 0;
  sockaddr_storage addr{};  // wildcard addresses are replaced by loopback
  bool operator<(const Listener& o) const { return inode < o.inode; }
};

inline std::set<unsigned long> socketInodes(pid_t pid) {
  std::set<unsigned long> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    char target[64] = {};
    const std::string link = dir + "/" + e->d_name;
    if (readlink(link.c_str(), target, sizeof(target) - 1) <= 0) continue;
    unsigned long inode = 0;
    if (std::sscanf(target, "socket:[%lu]", &inode) == 1) out.insert(inode);
  }
  closedir(d);
  return out;
}

// One line of /proc/net/tcp{,6}: "sl local rem st ... uid timeout inode".
inline bool parseLine(const std::string& line, bool v6, Listener* out) {
  std::istringstream in(line);
  std::string sl, local, remote, state, queues, timer, retr, uid, timeout;
  unsigned long inode = 0;
  if (!(in >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode))
    return false;
  if (state != "0A") return false;  // TCP_LISTEN
  const size_t colon = local.find(':');
  if (colon == std::string::npos) return false;
  const uint16_t port = static_cast<uint16_t>(std::strtoul(local.c_str() + colon + 1, nullptr, 16));
  Listener l;
  l.inode = inode;
  if (!v6) {
    auto& a = reinterpret_cast<sockaddr_in&>(l.addr);
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    // The kernel prints the 32-bit word as stored, in native order.
    a.sin_addr.s_addr = static_cast<uint32_t>(std::strtoul(local.substr(0, 8).c_str(), nullptr, 16));
    if (a.sin_addr.s_addr == htonl(INADDR_ANY)) a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  } else {
    auto& a = reinterpret_cast<sockaddr_in6&>(l.addr);
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    for (int i = 0; i < 4; ++i) {
      const uint32_t word =
          static_cast<uint32_t>(std::strtoul(local.substr(i * 8, 8).c_str(), nullptr, 16));
      std::memcpy(&a.sin6_addr.s6_addr[i * 4], &word, 4);
    }
    if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) a.sin6_addr = in6addr_loopback;
  }
  *out = l;
  return true;
}

// Every TCP socket `pid` has open in the LISTEN state.
inline std::set<Listener> listeners(pid_t pid) {
  std::set<Listener> out;
  const std::set<unsigned long> mine = socketInodes(pid);
  for (bool v6 : {false, true}) {
    std::ifstream f("/proc/" + std::to_string(pid) + (v6 ? "/net/tcp6" : "/net/tcp"));
    std::string line;
    std::getline(f, line);  // header
    while (std::getline(f, line)) {
      Listener l;
      if (parseLine(line, v6, &l) && mine.count(l.inode)) out.insert(l);
    }
  }
  return out;
}

}  // namespace proclisten
