// Which InfiniBand / RoCE ports braid may use: NCCL_IB_HCA, NCCL_IB_DISABLE and
// NCCL_IB_GID_INDEX, as pure functions over a description of the ports so that
// tests can feed any machine.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"

namespace braid::ib {

enum class LinkLayer { Unknown, InfiniBand, Ethernet };

enum class GidType { Unknown, IbRoceV1, RoceV2 };

struct GidEntry {
  int index = 0;
  unsigned char raw[16] = {};
  GidType type = GidType::Unknown;
};

struct PortDesc {
  std::string device;  // e.g. mlx5_0
  int port = 1;        // 1-based, as verbs numbers them
  bool active = false;
  LinkLayer linkLayer = LinkLayer::Unknown;
  std::vector<GidEntry> gids;  // non-zero entries only
};

// NCCL_IB_HCA: "[^][=]name[:port][,name[:port]...]". `^` excludes the listed
// ports instead of keeping only them; `=` compares names exactly instead of as
// prefixes (mlx5 matches mlx5_0 and mlx5_1 without it). Both may be combined
// ("^=mlx5_1"). A port-less entry matches every port of the device.
struct HcaFilter {
  struct Entry {
    std::string name;
    int port = -1;  // -1: any
  };
  bool exclude = false;
  bool exact = false;
  std::vector<Entry> entries;  // empty: no filter
};

// Malformed ports ("mlx5_0:x", ":1", "mlx5_0:0") are ncclInvalidUsage naming the entry.
Result parseHcaFilter(const std::string& text, HcaFilter* out);

bool hcaFilterAccepts(const HcaFilter& filter, const std::string& device, int port);

// Active ports the filter accepts, in input order; nothing when `disabled`
// (NCCL_IB_DISABLE=1).
std::vector<PortDesc> selectPorts(const std::vector<PortDesc>& ports, const HcaFilter& filter,
                                  bool disabled);

// NCCL_IB_GID_INDEX: empty means automatic (-1); otherwise a non-negative integer.
Result parseGidIndex(const std::string& text, int* out);

// The GID index to use on `port`: `configured` when >= 0 (it must exist on the
// port); on InfiniBand 0; on RoCE the first RoCE v2 GID holding an IPv4-mapped
// address, else the first RoCE v2 GID, else the first GID. ncclSystemError if none.
Result chooseGidIndex(const PortDesc& port, int configured, int* out);

}  // namespace braid::ib
