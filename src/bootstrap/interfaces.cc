#include "bootstrap/interfaces.h"

#include <ifaddrs.h>
#include <netinet/in.h>
#include <strings.h>

#include <cstring>
#include <memory>

#include "base/env.h"
#include "base/log.h"
#include "base/socket.h"

namespace braid::bootstrap {

namespace {

struct NameSpec {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;
};

NameSpec parseNameSpec(const std::string& text) {
  NameSpec spec;
  size_t pos = 0;
  if (pos < text.size() && text[pos] == '^') {
    spec.exclude = true;
    ++pos;
  }
  if (pos < text.size() && text[pos] == '=') {
    spec.exact = true;
    ++pos;
  }
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string tok = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!tok.empty()) spec.names.push_back(tok);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return spec;
}

bool listed(const NameSpec& spec, const std::string& name) {
  for (const std::string& n : spec.names) {
    if (spec.exact ? name == n : name.compare(0, n.size(), n) == 0) return true;
  }
  return false;
}

bool isLinkLocalV6(const sockaddr_storage& addr) {
  if (addr.ss_family != AF_INET6) return false;
  const in6_addr& a = reinterpret_cast<const sockaddr_in6&>(addr).sin6_addr;
  return IN6_IS_ADDR_LINKLOCAL(&a);
}

bool usable(const NetInterface& nic, int family) {
  if (!(nic.flags & IFF_UP)) return false;
  if (nic.addr.ss_family != AF_INET && nic.addr.ss_family != AF_INET6) return false;
  if (family != AF_UNSPEC && nic.addr.ss_family != family) return false;
  // Link-local IPv6 needs a scope id that peers on other hosts cannot use.
  return !isLinkLocalV6(nic.addr);
}

bool loopbackNic(const NetInterface& nic) {
  return (nic.flags & IFF_LOOPBACK) || isLoopback(nic.addr);
}

bool virtualBridge(const NetInterface& nic) {
  return nic.name.compare(0, 6, "docker") == 0 || nic.name.compare(0, 5, "virbr") == 0;
}

// Raw address bytes of an IPv4 or IPv6 sockaddr.
const uint8_t* addrBytes(const sockaddr_storage& a, size_t* len) {
  if (a.ss_family == AF_INET) {
    *len = 4;
    return reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in&>(a).sin_addr);
  }
  *len = 16;
  return reinterpret_cast<const uint8_t*>(&reinterpret_cast<const sockaddr_in6&>(a).sin6_addr);
}

bool subnetHolds(const NetInterface& nic, const sockaddr_storage& target) {
  if (nic.addr.ss_family != target.ss_family || nic.netmask.ss_family != target.ss_family)
    return false;
  size_t n = 0, m = 0, t = 0;
  const uint8_t* a = addrBytes(nic.addr, &n);
  const uint8_t* mask = addrBytes(nic.netmask, &m);
  const uint8_t* b = addrBytes(target, &t);
  bool anyMask = false;
  for (size_t i = 0; i < n; ++i) {
    if ((a[i] & mask[i]) != (b[i] & mask[i])) return false;
    anyMask |= mask[i] != 0;
  }
  return anyMask;  // a zero mask would "hold" every address
}

std::string describeAll(const std::vector<NetInterface>& all) {
  std::string s;
  for (const NetInterface& nic : all) {
    if (!s.empty()) s += ", ";
    s += nic.name + " (" + hostToString(nic.addr) + ((nic.flags & IFF_UP) ? "" : ", down") + ")";
  }
  return s.empty() ? "none" : s;
}

template <typename Pred>
const NetInterface* firstWhere(const std::vector<const NetInterface*>& c, Pred pred) {
  for (const NetInterface* nic : c)
    if (pred(*nic)) return nic;
  return nullptr;
}

// First candidate satisfying `pred`, preferring the root's family.
template <typename Pred>
const NetInterface* preferFamily(const std::vector<const NetInterface*>& c, int family, Pred pred) {
  if (family != AF_UNSPEC) {
    if (const NetInterface* nic =
            firstWhere(c, [&](const NetInterface& n) { return n.addr.ss_family == family && pred(n); }))
      return nic;
  }
  return firstWhere(c, pred);
}

const NetInterface* defaultPolicy(const std::vector<const NetInterface*>& c,
                                  const sockaddr_storage* root) {
  int rootFamily = root ? root->ss_family : AF_UNSPEC;
  if (root && isLoopback(*root)) {
    if (const NetInterface* nic = preferFamily(c, rootFamily, loopbackNic)) return nic;
  }
  if (root) {
    if (const NetInterface* nic =
            firstWhere(c, [&](const NetInterface& n) { return subnetHolds(n, *root); }))
      return nic;
  }
  if (const NetInterface* nic = preferFamily(
          c, rootFamily, [](const NetInterface& n) { return !loopbackNic(n) && !virtualBridge(n); }))
    return nic;
  if (const NetInterface* nic = preferFamily(c, rootFamily, loopbackNic)) return nic;
  // Only container/VM bridges are left: better than nothing.
  return c.empty() ? nullptr : c.front();
}

}  // namespace

bool interfaceNameMatches(const std::string& specText, const std::string& name) {
  NameSpec spec = parseNameSpec(specText);
  return listed(spec, name) != spec.exclude;
}

Result selectInterface(const std::vector<NetInterface>& all, const InterfaceQuery& query,
                       NetInterface* out) {
  std::vector<const NetInterface*> candidates;
  for (const NetInterface& nic : all)
    if (usable(nic, query.family)) candidates.push_back(&nic);
  const char* familyName = query.family == AF_INET    ? " of family AF_INET"
                           : query.family == AF_INET6 ? " of family AF_INET6"
                                                      : "";

  const NetInterface* chosen = nullptr;
  if (!query.ifname.empty()) {
    NameSpec spec = parseNameSpec(query.ifname);
    std::vector<const NetInterface*> matched;
    for (const NetInterface* nic : candidates)
      if (listed(spec, nic->name) != spec.exclude) matched.push_back(nic);
    if (matched.empty())
      return fail(ncclInvalidArgument,
                  "NCCL_SOCKET_IFNAME=%s selects no usable interface%s (up, IPv4 or global IPv6); "
                  "interfaces on this host: %s. Set NCCL_SOCKET_IFNAME to one of them",
                  query.ifname.c_str(), familyName, describeAll(all).c_str());
    if (spec.exclude) {
      chosen = defaultPolicy(matched, query.root);
    } else {
      // The user named these interfaces: honour them, just pick the best one.
      if (query.root)
        chosen = firstWhere(matched,
                            [&](const NetInterface& n) { return subnetHolds(n, *query.root); });
      if (!chosen) chosen = matched.front();
    }
  } else {
    chosen = defaultPolicy(candidates, query.root);
  }
  if (!chosen)
    return fail(ncclSystemError,
                "no usable network interface%s (up, IPv4 or global IPv6) on this host; interfaces: "
                "%s. Bring one up or set NCCL_SOCKET_IFNAME/NCCL_SOCKET_FAMILY",
                familyName, describeAll(all).c_str());
  *out = *chosen;
  return Result::success();
}

Result listInterfaces(std::vector<NetInterface>* out) {
  ifaddrs* head = nullptr;
  if (getifaddrs(&head) != 0) return systemFail("getifaddrs() failed");
  std::unique_ptr<ifaddrs, decltype(&freeifaddrs)> guard(head, freeifaddrs);
  out->clear();
  for (ifaddrs* ifa = head; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr) continue;
    int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    NetInterface nic;
    nic.name = ifa->ifa_name ? ifa->ifa_name : "";
    nic.flags = ifa->ifa_flags;
    size_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    memcpy(&nic.addr, ifa->ifa_addr, len);
    if (ifa->ifa_netmask) memcpy(&nic.netmask, ifa->ifa_netmask, len);
    nic.netmask.ss_family = static_cast<sa_family_t>(family);
    out->push_back(std::move(nic));
  }
  return Result::success();
}

int socketFamilyFromEnv() {
  std::string v = envString("NCCL_SOCKET_FAMILY");
  if (v.empty()) return AF_UNSPEC;
  if (!strcasecmp(v.c_str(), "AF_INET") || v == "4") return AF_INET;
  if (!strcasecmp(v.c_str(), "AF_INET6") || v == "6") return AF_INET6;
  BRAID_WARN("NCCL_SOCKET_FAMILY=%s is neither AF_INET nor AF_INET6; ignoring it", v.c_str());
  return AF_UNSPEC;
}

Result chooseLocalAddress(const sockaddr_storage* root, sockaddr_storage* out,
                          std::string* ifname) {
  std::vector<NetInterface> all;
  BRAID_TRY(listInterfaces(&all));
  InterfaceQuery query;
  query.ifname = envString("NCCL_SOCKET_IFNAME");
  query.family = socketFamilyFromEnv();
  query.root = root;
  NetInterface nic;
  BRAID_TRY(selectInterface(all, query, &nic));
  *out = nic.addr;
  setAddrPort(out, 0);
  if (ifname) *ifname = nic.name;
  BRAID_INFO(kLogBootstrap | kLogNet, "bootstrap: using interface %s (%s)%s%s", nic.name.c_str(),
             hostToString(nic.addr).c_str(), root ? " to reach root " : "",
             root ? addrToString(*root).c_str() : "");
  return Result::success();
}

}  // namespace braid::bootstrap
