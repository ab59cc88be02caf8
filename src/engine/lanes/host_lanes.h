// The host runner's state of one communicator (ncclComm::hostLanes): its
// FIFOs and ports, the lanes of its groups ready to run again, and the
// scratch memory of its plans. Made by the first group on host buffers, kept
// until the communicator goes.
#pragma once

#include <vector>

#include "engine/comm.h"
#include "engine/lanes/plan_cache.h"
#include "engine/lanes/port_table.h"

namespace braid::lanes {

struct HostLanes {
  PortTable ports{makeHostLaneMemory()};
  PlanCache plans;
  std::vector<char> scratch;  // Buffer::Scratch of the plans of one group
};

// The communicator's host lanes, made on first use.
HostLanes& hostLanesOf(ncclComm* comm);

}  // namespace braid::lanes
