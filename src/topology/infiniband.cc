#include "topology/sysfs.h"
#include "topology/topology.h"

namespace braid::topology {

bool IbPort::active() const {
  // sysfs writes "4: ACTIVE"; 4 is IB_PORT_ACTIVE in the port state enum.
  return state == "4: ACTIVE" || state == "ACTIVE" || state == "4";
}

bool IbDevice::usable() const {
  for (const IbPort& p : ports)
    if (p.active()) return true;
  return false;
}

void readIbDevices(const std::string& sysRoot, Topology* t) {
  const std::string base = sysRoot + "/class/infiniband";
  t->ib.clear();
  for (const std::string& name : listDir(base)) {
    const std::string dir = base + "/" + name;
    IbDevice dev;
    dev.name = name;
    dev.pciBusId = pciBusIdOf(dir + "/device");
    for (const std::string& portName : listDir(dir + "/ports")) {
      IbPort port;
      if (!numberAfter(portName, "", &port.number)) continue;
      const std::string pdir = dir + "/ports/" + portName;
      if (!readLine(pdir + "/state", &port.state))
        t->warnings.push_back("cannot read " + pdir + "/state; port taken as down");
      readLine(pdir + "/link_layer", &port.linkLayer);
      readLine(pdir + "/rate", &port.rate);
      dev.ports.push_back(std::move(port));
    }
    t->ib.push_back(std::move(dev));
  }
}

}  // namespace braid::topology
