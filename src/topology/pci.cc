#include "topology/sysfs.h"
#include "topology/topology.h"

namespace braid::topology {

namespace {

constexpr uint32_t kVendorNvidia = 0x10de;

}  // namespace

bool pciKindOf(uint32_t vendor, uint32_t classCode, PciKind* kind) {
  const uint32_t baseClass = classCode >> 16;
  const uint32_t subClass = (classCode >> 8) & 0xff;
  if (baseClass == 0x03 && vendor == kVendorNvidia) {
    *kind = PciKind::kGpu;
  } else if (baseClass == 0x02 && subClass == 0x07) {
    *kind = PciKind::kInfiniBand;
  } else if (baseClass == 0x02) {
    *kind = PciKind::kNic;
  } else {
    return false;
  }
  return true;
}

const char* pciKindName(PciKind kind) {
  switch (kind) {
    case PciKind::kGpu: return "gpu";
    case PciKind::kNic: return "nic";
    case PciKind::kInfiniBand: return "infiniband";
  }
  return "?";
}

void readPciDevices(const std::string& sysRoot, Topology* t) {
  const std::string base = sysRoot + "/bus/pci/devices";
  t->pci.clear();
  for (const std::string& busId : listDir(base)) {
    const std::string dir = base + "/" + busId;
    PciDevice dev;
    dev.busId = busId;
    if (!readHex(dir + "/vendor", &dev.vendor) || !readHex(dir + "/class", &dev.classCode)) {
      t->warnings.push_back("cannot read vendor/class of PCI device " + busId + "; skipped");
      continue;
    }
    if (!pciKindOf(dev.vendor, dev.classCode, &dev.kind)) continue;
    readHex(dir + "/device", &dev.device);
    long long node;
    if (readInt(dir + "/numa_node", &node) && node >= 0) dev.numaNode = static_cast<int>(node);
    dev.path = pciChain(dir);
    if (dev.path.empty()) dev.path = busId;
    t->pci.push_back(std::move(dev));
  }
}

}  // namespace braid::topology
