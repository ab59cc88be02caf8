#include "topology/placement.h"

namespace braid::topology {

int hostOfRank(int rank, const PlacementOptions& opt) {
  return static_cast<int>(static_cast<long long>(rank) * opt.hosts / opt.nranks);
}

std::vector<RankPlacement> simulatePlacements(const Topology& machine, const PlacementOptions& opt) {
  const std::vector<const PciDevice*> gpus = machine.gpus();
  const bool ib = machine.hasUsableIb();
  std::vector<RankPlacement> out;
  std::vector<int> localCount(opt.hosts > 0 ? opt.hosts : 1, 0);
  for (int r = 0; r < opt.nranks; ++r) {
    const int host = hostOfRank(r, opt);
    const int local = localCount[host]++;
    RankPlacement p;
    // Small distinct values; only equality matters to the transports.
    p.hostHash = 1000 + host;
    p.shmDomain = p.hostHash;
    p.processId = opt.threadRanks ? 100000ull * (host + 1) : 100000ull * (host + 1) + 1 + local;
    p.ibUsable = ib;
    if (!gpus.empty()) {
      const PciDevice* gpu = gpus[local % gpus.size()];
      p.gpuBusId = gpu->busId;
      p.numaNode = gpu->numaNode;
    }
    if (p.numaNode < 0 && !machine.numaNodes.empty())
      p.numaNode = machine.numaNodes[local % machine.numaNodes.size()].id;
    out.push_back(p);
  }
  return out;
}

}  // namespace braid::topology
