// The lane executor on host threads: runs a group's plans through the plan
// interpreter of the device executor (kernels/executor), one thread per lane,
// over FIFOs in heap or shared memory (port_table.h), bridged over the network
// to ranks on other hosts (net_bridge.h). With BRAID_EXECUTOR=lanes
// it runs host buffers in place of the host executor, so the device executor's
// plans, protocols, FIFO set-up and stage ordering run in real multi-process
// jobs on machines without a GPU; the CUDA path runs the same lanes as blocks.
#pragma once

#include <vector>

#include "core/result.h"
#include "core/task.h"

namespace braid {

// Every communicator of the group asked for the lane executor. Ranks on other
// hosts are reached through its network bridge (net_bridge.h).
bool laneExecutorApplies(const std::vector<Task>& tasks);

// Every communicator of the group has all its ranks on this host, sharing
// memory (what the CUDA plan kernels need for now). Alike on every rank.
bool lanesShareMemoryWithEveryPeer(const std::vector<Task>& tasks);

// Runs the group (host buffers) and returns when it is complete, or with an
// error naming the lane, step and peer on abort, timeout, a lost peer or a
// plan the FIFOs cannot carry.
Result runLaneGroup(const std::vector<Task>& tasks);

}  // namespace braid
