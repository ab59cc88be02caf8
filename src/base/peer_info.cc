#include "base/peer_info.h"

#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "base/cpu_affinity.h"
#include "base/env.h"
#include "base/process_liveness.h"

namespace braid {

namespace {

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string readFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string nsInode(const char* path) {
  struct stat st;
  if (stat(path, &st) != 0) return "";
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
}

}  // namespace

uint64_t localHostHash() {
  std::string id = envString("BRAID_HOSTID");
  if (id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    id = std::string(host) + "|" + readFirstLine("/proc/sys/kernel/random/boot_id") + "|" +
         nsInode("/proc/self/ns/net");
  }
  return fnv1a(id);
}

PeerInfo makeLocalPeerInfo(int rank, int cudaDev, const sockaddr_storage& tcpAddr) {
  PeerInfo info;
  memset(&info, 0, sizeof(info));
  info.rank = rank;
  info.cudaDev = cudaDev;
  info.gpuBusId = -1;
  info.nonce = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  info.hostHash = localHostHash();
  struct stat shm;
  std::string shmId = nsInode("/proc/self/ns/ipc") + "|" +
                      (stat("/dev/shm", &shm) == 0 ? std::to_string(shm.st_dev) : std::string());
  info.shmDomain = fnv1a(shmId, info.hostHash);
  info.pid = getpid();
  info.startTime = processStartTime(getpid());
  info.processId = fnv1a(std::to_string(info.pid) + "|" + std::to_string(info.startTime), info.hostHash);
  info.pidNamespace = fnv1a(nsInode("/proc/self/ns/pid"), info.hostHash);
  static_assert(sizeof(info.tcpAddr) >= sizeof(sockaddr_storage), "address does not fit");
  sockaddr_storage addr = tcpAddr;
  // Transports listen on the bootstrap's interface, on a port of their own.
  if (addr.ss_family == AF_INET) reinterpret_cast<sockaddr_in*>(&addr)->sin_port = 0;
  if (addr.ss_family == AF_INET6) reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port = 0;
  memcpy(info.tcpAddr, &addr, sizeof(addr));
  char host[64] = {};
  gethostname(host, sizeof(host) - 1);
  memcpy(info.hostname, host, sizeof(info.hostname));
  for (int c : allowedCpus())
    if (c < 1024) info.cpuMask[c / 64] |= uint64_t(1) << (c % 64);
  return info;
}

}  // namespace braid
