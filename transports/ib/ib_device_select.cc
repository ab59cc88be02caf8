#include "transports/ib/ib_device_select.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace braid::ib {

namespace {

bool parsePositive(const std::string& s, long max, long* out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 9)
    return false;
  *out = strtol(s.c_str(), nullptr, 10);
  return *out >= 1 && *out <= max;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

bool isIpv4Mapped(const unsigned char raw[16]) {
  static const unsigned char prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(raw, prefix, sizeof(prefix)) == 0;
}

}  // namespace

Result parseHcaFilter(const std::string& text, HcaFilter* out) {
  HcaFilter f;
  std::string s = trim(text);
  if (!s.empty() && s[0] == '^') {
    f.exclude = true;
    s.erase(0, 1);
  }
  if (!s.empty() && s[0] == '=') {
    f.exact = true;
    s.erase(0, 1);
  }
  size_t start = 0;
  while (start <= s.size() && !s.empty()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    const std::string item = trim(s.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;  // "a,,b" and a trailing comma are harmless
    HcaFilter::Entry e;
    const size_t colon = item.find(':');
    e.name = item.substr(0, colon);
    if (e.name.empty())
      return fail(ncclInvalidUsage, "NCCL_IB_HCA entry '%s' has no device name", item.c_str());
    if (colon != std::string::npos) {
      long port = 0;
      if (!parsePositive(item.substr(colon + 1), 255, &port))
        return fail(ncclInvalidUsage,
                    "NCCL_IB_HCA entry '%s': the port must be a number from 1 to 255",
                    item.c_str());
      e.port = static_cast<int>(port);
    }
    f.entries.push_back(e);
  }
  *out = std::move(f);
  return Result::success();
}

bool hcaFilterAccepts(const HcaFilter& filter, const std::string& device, int port) {
  if (filter.entries.empty()) return true;
  bool listed = false;
  for (const auto& e : filter.entries) {
    const bool nameMatches =
        filter.exact ? device == e.name : device.compare(0, e.name.size(), e.name) == 0;
    if (nameMatches && (e.port < 0 || e.port == port)) listed = true;
  }
  return listed != filter.exclude;
}

std::vector<PortDesc> selectPorts(const std::vector<PortDesc>& ports, const HcaFilter& filter,
                                  bool disabled) {
  std::vector<PortDesc> chosen;
  if (disabled) return chosen;
  for (const auto& p : ports)
    if (p.active && p.linkLayer != LinkLayer::Unknown && hcaFilterAccepts(filter, p.device, p.port))
      chosen.push_back(p);
  return chosen;
}

Result parseGidIndex(const std::string& text, int* out) {
  const std::string s = trim(text);
  if (s.empty()) {
    *out = -1;
    return Result::success();
  }
  if (s == "0") {
    *out = 0;
    return Result::success();
  }
  long v = 0;
  if (!parsePositive(s, 65535, &v))
    return fail(ncclInvalidUsage, "NCCL_IB_GID_INDEX='%s' is not a GID table index (0..65535)",
                s.c_str());
  *out = static_cast<int>(v);
  return Result::success();
}

Result chooseGidIndex(const PortDesc& port, int configured, int* out) {
  if (configured >= 0) {
    for (const auto& g : port.gids)
      if (g.index == configured) {
        *out = configured;
        return Result::success();
      }
    return fail(ncclInvalidUsage, "NCCL_IB_GID_INDEX=%d: %s port %d has no such GID", configured,
                port.device.c_str(), port.port);
  }
  if (port.linkLayer == LinkLayer::InfiniBand) {
    *out = 0;  // routing uses the LID; GID 0 (link-local) is always there
    return Result::success();
  }
  const GidEntry* best = nullptr;
  for (const auto& g : port.gids) {
    if (g.type == GidType::RoceV2 && isIpv4Mapped(g.raw)) {
      best = &g;
      break;
    }
    if (!best && g.type == GidType::RoceV2) best = &g;
  }
  if (!best && !port.gids.empty()) best = &port.gids.front();
  if (!best)
    return fail(ncclSystemError, "%s port %d has no GID: is an IP address configured on it?",
                port.device.c_str(), port.port);
  *out = best->index;
  return Result::success();
}

}  // namespace braid::ib
