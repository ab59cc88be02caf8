#include "topology/sysfs.h"
#include "topology/topology.h"

namespace braid::topology {

void readCpus(const std::string& sysRoot, Topology* t) {
  const std::string base = sysRoot + "/devices/system/cpu";
  std::string online;
  if (!readLine(base + "/online", &online) || !parseCpuList(online, &t->onlineCpus)) {
    t->warnings.push_back("cannot parse " + base + "/online; counting cpuN directories instead");
    t->onlineCpus.clear();
    for (const std::string& name : listDir(base, "cpu")) {
      int id;
      if (numberAfter(name, "cpu", &id)) t->onlineCpus.push_back(id);
    }
  }
  t->cpus.clear();
  for (int id : t->onlineCpus) {
    Cpu cpu;
    cpu.id = id;
    const std::string topo = base + "/cpu" + std::to_string(id) + "/topology";
    long long v;
    if (readInt(topo + "/physical_package_id", &v)) cpu.package = static_cast<int>(v);
    if (readInt(topo + "/core_id", &v)) cpu.core = static_cast<int>(v);
    t->cpus.push_back(cpu);
  }
}

}  // namespace braid::topology
