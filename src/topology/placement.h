// Pretend placements for braid-topo: N ranks spread over H hosts that each look
// like this one, so the transport matrix can be shown before any job runs.
#pragma once

#include <vector>

#include "topology/pair_class.h"
#include "topology/topology.h"

namespace braid::topology {

struct PlacementOptions {
  int nranks = 1;
  int hosts = 1;             // rank r lives on host r * hosts / nranks
  bool threadRanks = false;  // all ranks of a host in one process (ncclCommInitAll)
};

int hostOfRank(int rank, const PlacementOptions& opt);

// Ranks of one host take the host's GPUs in turn (none if it has none) and sit on
// their GPU's NUMA node, else on the NUMA nodes in turn.
std::vector<RankPlacement> simulatePlacements(const Topology& machine, const PlacementOptions& opt);

}  // namespace braid::topology
