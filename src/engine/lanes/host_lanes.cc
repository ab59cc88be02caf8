#include "engine/lanes/host_lanes.h"

#include <memory>

namespace braid::lanes {

void HostLanesDeleter::operator()(HostLanes* lanes) const { std::default_delete<HostLanes>()(lanes); }

HostLanes& hostLanesOf(ncclComm* comm) {
  if (!comm->hostLanes) comm->hostLanes.reset(std::make_unique<HostLanes>().release());
  return *comm->hostLanes;
}

}  // namespace braid::lanes
