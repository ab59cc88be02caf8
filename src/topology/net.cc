#include <net/if.h>

#include "topology/sysfs.h"
#include "topology/topology.h"

namespace braid::topology {

void readNetInterfaces(const std::string& sysRoot, Topology* t) {
  const std::string base = sysRoot + "/class/net";
  t->interfaces.clear();
  for (const std::string& name : listDir(base)) {
    const std::string dir = base + "/" + name;
    NetDevice nif;
    nif.name = name;
    nif.pciBusId = pciBusIdOf(dir + "/device");
    long long speed;
    // Drivers report -1 or refuse the read when they do not know (virtio, link down).
    if (readInt(dir + "/speed", &speed) && speed > 0 && speed < (1ll << 31))
      nif.speedMbps = static_cast<int>(speed);
    uint32_t flags = 0;
    if (readHex(dir + "/flags", &flags)) {
      nif.up = (flags & IFF_UP) != 0;
    } else {
      t->warnings.push_back("cannot read " + dir + "/flags; " + name + " taken as down");
    }
    readLine(dir + "/operstate", &nif.operstate);
    t->interfaces.push_back(std::move(nif));
  }
}

}  // namespace braid::topology
