#include "topology/topology.h"

#include <sys/stat.h>

#include <set>
#include <utility>

namespace braid::topology {

int Topology::packageCount() const {
  std::set<int> packages;
  for (const Cpu& c : cpus) packages.insert(c.package);
  return static_cast<int>(packages.size());
}

int Topology::coreCount() const {
  std::set<std::pair<int, int>> cores;
  for (const Cpu& c : cpus) cores.insert({c.package, c.core < 0 ? -1 - c.id : c.core});
  return static_cast<int>(cores.size());
}

std::vector<const PciDevice*> Topology::gpus() const {
  std::vector<const PciDevice*> out;
  for (const PciDevice& d : pci)
    if (d.kind == PciKind::kGpu) out.push_back(&d);
  return out;
}

bool Topology::hasUsableIb() const {
  for (const IbDevice& d : ib)
    if (d.usable()) return true;
  return false;
}

Result discoverTopology(const std::string& sysRoot, Topology* out) {
  struct stat st;
  if (stat(sysRoot.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return fail(ncclInvalidArgument, "topology: %s is not a directory (expected a sysfs root)",
                sysRoot.c_str());
  Topology t;
  readCpus(sysRoot, &t);
  readNumaNodes(sysRoot, &t);
  readPciDevices(sysRoot, &t);
  readNetInterfaces(sysRoot, &t);
  readIbDevices(sysRoot, &t);
  *out = std::move(t);
  return Result::success();
}

}  // namespace braid::topology
