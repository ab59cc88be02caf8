#include <algorithm>

#include "topology/sysfs.h"
#include "topology/topology.h"

namespace braid::topology {

void readNumaNodes(const std::string& sysRoot, Topology* t) {
  const std::string base = sysRoot + "/devices/system/node";
  t->numaNodes.clear();
  for (const std::string& name : listDir(base, "node")) {
    NumaNode node;
    if (!numberAfter(name, "node", &node.id)) continue;  // "node" prefix of other files
    std::string text;
    const std::string dir = base + "/" + name;
    if (!readLine(dir + "/cpulist", &text) || !parseCpuList(text, &node.cpus)) {
      t->warnings.push_back("cannot parse " + dir + "/cpulist; node " + std::to_string(node.id) +
                            " listed without CPUs");
      node.cpus.clear();
    }
    t->numaNodes.push_back(std::move(node));
  }
  std::sort(t->numaNodes.begin(), t->numaNodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  readNumaDistances(sysRoot, t);
  assignCpusToNodes(t);
}

void readNumaDistances(const std::string& sysRoot, Topology* t) {
  const std::string base = sysRoot + "/devices/system/node";
  for (NumaNode& node : t->numaNodes) {
    const std::string file = base + "/node" + std::to_string(node.id) + "/distance";
    std::string text;
    if (!readLine(file, &text) || !parseIntList(text, &node.distances)) {
      t->warnings.push_back("cannot parse " + file);
      node.distances.clear();
    }
    // The distance row is indexed by node order; a row of the wrong length cannot
    // be matched to nodes, so drop it rather than misread it.
    if (!node.distances.empty() && node.distances.size() != t->numaNodes.size()) {
      t->warnings.push_back("node " + std::to_string(node.id) + ": " +
                            std::to_string(node.distances.size()) + " distances for " +
                            std::to_string(t->numaNodes.size()) + " nodes; ignored");
      node.distances.clear();
    }
  }
}

void assignCpusToNodes(Topology* t) {
  for (Cpu& cpu : t->cpus)
    for (const NumaNode& node : t->numaNodes)
      if (std::binary_search(node.cpus.begin(), node.cpus.end(), cpu.id)) cpu.numaNode = node.id;
}

}  // namespace braid::topology
