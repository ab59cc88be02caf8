// The engine's host runner: a group's calls run through the plan interpreter
// (kernels/executor), the same step code the CUDA kernel runs, with every lane
// resumable and all of them taking turns on the calling thread. FIFOs live in
// heap or shared memory (port_table.h) and are bridged over the network to
// ranks on other hosts (net_bridge.h). Host buffers run here, and so does the
// host half of device buffers staged through pinned memory.
#pragma once

#include <vector>

#include "base/result.h"
#include "engine/task.h"

namespace braid::lanes {

// Every communicator of the group has all its ranks on this host, sharing
// memory (what the CUDA plan kernels need for now). Alike on every rank.
bool lanesShareMemoryWithEveryPeer(const std::vector<engine::Task>& tasks);

// Runs the group and returns when it is complete and every message has left
// this process, or with an error naming the lane, step and peer on abort,
// timeout, a lost peer or a plan the FIFOs cannot carry. The prepared lanes
// of a group are kept per communicators and shape (plan_cache.h).
Result runLaneGroup(const std::vector<engine::Task>& tasks);

}  // namespace braid::lanes
