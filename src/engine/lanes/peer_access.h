// When a group's calls may read and write each other's buffers in place (the
// PeerAccess algorithm, schedule/peer_access.cc): every rank of a
// communicator is in the group, driven by this thread, each with exactly one
// call, and the calls agree (collective, count, datatype, reduction), so one
// runner runs all their lanes together and ends them together: the host
// runner on this thread, or one plan-kernel launch per device
// (engine/device/launch_plan.h) whose streams it joins. A PeerReduce lane
// never waits for another, so no barrier is needed inside; and the runner's
// start and end are the barriers outside (every input is ready before any
// lane reads it; no rank's call ends while another still writes its output).
// Calls that disagree never address each other's memory: they take the FIFO
// schedules, whose fingerprints report the mismatch.
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "engine/task.h"

struct ncclComm;

namespace braid::lanes {

// For each communicator of the group whose call may use PeerAccess: the
// group's communicators of its ranks, in rank order (itself among them).
// `sameRunner(a, b)`: whether two calls would run in one launch or host group
// (the same device for plan kernels).
using PeerAccessGroups = std::map<const ncclComm*, std::vector<ncclComm*>>;
PeerAccessGroups peerAccessGroups(const std::vector<const engine::Task*>& tasks,
                                  const std::function<bool(const engine::Task&, const engine::Task&)>& sameRunner);

}  // namespace braid::lanes
