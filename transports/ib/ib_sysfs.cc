#include "transports/ib/ib_sysfs.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace braid::ib {

namespace {

std::vector<std::string> listDir(const std::string& path) {
  std::vector<std::string> names;
  DIR* d = opendir(path.c_str());
  if (!d) return names;
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  closedir(d);
  return names;
}

bool readLine(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::getline(in, *out);
  while (!out->empty() && (out->back() == '\n' || out->back() == ' ')) out->pop_back();
  return true;
}

bool isNumber(const std::string& s) {
  return !s.empty() && s.size() < 9 && s.find_first_not_of("0123456789") == std::string::npos;
}

GidType gidType(const std::string& text) {
  if (text == "RoCE v2") return GidType::RoceV2;
  if (text == "IB/RoCE v1") return GidType::IbRoceV1;
  return GidType::Unknown;
}

std::vector<GidEntry> readGids(const std::string& portDir) {
  std::vector<GidEntry> gids;
  for (const auto& n : listDir(portDir + "/gids")) {
    std::string text;
    GidEntry g;
    if (!isNumber(n) || !readLine(portDir + "/gids/" + n, &text) || !parseGidText(text, g.raw))
      continue;
    if (std::all_of(g.raw, g.raw + 16, [](unsigned char c) { return c == 0; })) continue;
    g.index = atoi(n.c_str());
    std::string type;
    if (readLine(portDir + "/gid_attrs/types/" + n, &type)) g.type = gidType(type);
    gids.push_back(g);
  }
  std::sort(gids.begin(), gids.end(),
            [](const GidEntry& a, const GidEntry& b) { return a.index < b.index; });
  return gids;
}

PortDesc readPort(const std::string& device, int port, const std::string& dir) {
  PortDesc p;
  p.device = device;
  p.port = port;
  std::string state, link;
  // "4: ACTIVE": the number is the verbs port state.
  p.active = readLine(dir + "/state", &state) && atoi(state.c_str()) == 4;
  if (readLine(dir + "/link_layer", &link))
    p.linkLayer = link == "InfiniBand" ? LinkLayer::InfiniBand
                  : link == "Ethernet" ? LinkLayer::Ethernet
                                       : LinkLayer::Unknown;
  p.gids = readGids(dir);
  return p;
}

}  // namespace

bool parseGidText(const std::string& text, unsigned char out[16]) {
  // Eight groups of four hex digits, as the kernel prints them.
  if (text.size() != 39) return false;
  std::string hex;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool colonHere = i % 5 == 4;
    if (colonHere != (text[i] == ':')) return false;
    if (!colonHere) {
      if (!isxdigit(static_cast<unsigned char>(text[i]))) return false;
      hex.push_back(text[i]);
    }
  }
  for (int i = 0; i < 16; ++i)
    out[i] = static_cast<unsigned char>(strtoul(hex.substr(2 * i, 2).c_str(), nullptr, 16));
  return true;
}

std::vector<PortDesc> scanSysfsPorts(const std::string& sysRoot) {
  std::vector<PortDesc> ports;
  const std::string base = sysRoot + "/class/infiniband";
  for (const auto& dev : listDir(base)) {
    const std::string portsDir = base + "/" + dev + "/ports";
    for (const auto& n : listDir(portsDir))
      if (isNumber(n)) ports.push_back(readPort(dev, atoi(n.c_str()), portsDir + "/" + n));
  }
  std::sort(ports.begin(), ports.end(), [](const PortDesc& a, const PortDesc& b) {
    return a.device != b.device ? a.device < b.device : a.port < b.port;
  });
  return ports;
}

}  // namespace braid::ib
