// Reads the RDMA ports the kernel exposes under <root>/class/infiniband, so
// braid can tell whether a device exists before loading libibverbs, and tests
// can describe any machine with a fixture tree.
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "transports/ib/ib_device_select.h"

namespace braid::ib {

// `sysRoot` is "/sys" in production. For every <root>/class/infiniband/<dev>/
// ports/<n>: state ("4: ACTIVE" is active), link_layer ("InfiniBand" /
// "Ethernet"), gids/<i> (all-zero entries skipped) and gid_attrs/types/<i>
// ("IB/RoCE v1" / "RoCE v2"). A missing class directory is no device, not an
// error; unreadable port files leave that port inactive. Sorted by device, port.
std::vector<PortDesc> scanSysfsPorts(const std::string& sysRoot);

// "fe80:0000:0000:0000:0202:c9ff:fe00:0001" -> 16 bytes; false if malformed.
bool parseGidText(const std::string& text, unsigned char out[16]);

}  // namespace braid::ib
