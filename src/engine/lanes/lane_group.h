// A group's calls made ready for the host runner: planned, merged into lanes
// (comm_program.h), their FIFOs connected (port_table.h) and laid out as a lane
// image in host memory. A group is kept per communicators and shape
// (engine/lanes/plan_cache.h), so a repeated group only rebinds its buffers.
#pragma once

#include <memory>
#include <vector>

#include "base/result.h"
#include "engine/lanes/lane_program.h"
#include "engine/lanes/peer_access.h"
#include "engine/lanes/zero_copy.h"
#include "engine/task.h"
#include "kernels/executor/plan_interpreter.h"

struct ncclComm;

namespace braid::lanes {

class PortTable;

// One communicator's part of the group.
struct CommRun {
  ncclComm* comm = nullptr;
  // Its FIFOs: the host lanes' (hostLanes->ports), or a plan kernel's.
  PortTable* ports = nullptr;
  std::vector<engine::Task> tasks;  // copies: a cached group outlives the calls
  std::shared_ptr<const LaneProgram> program;  // CommProgram::program
  std::vector<size_t> scratchOffsets;  // per call, into the host lanes' scratch
  std::vector<uint32_t> shapeFingerprints;  // per call (engine/fingerprint.h)
  std::vector<executor::OpBuffers> ops;
  size_t opsOffset = 0;        // bytes from the image's start to `ops`' copy in it
  std::vector<uint64_t> image;  // the lanes (lane_image.h), run in place
};

// One lane and where the runner is with it.
struct LaneRun {
  CommRun* owner = nullptr;
  const ProgramLane* lane = nullptr;
  executor::LaneExec* exec = nullptr;  // in owner->image
  // A lane the host neither runs nor can read (a plan kernel's, in device
  // memory) has no exec: the watchdog sees it through its beacon.
  const executor::LaneBeacon* beacon = nullptr;
  bool done = false;
  executor::ExecStatus status = executor::ExecStatus::Ok;
};

// Neither copied nor moved: its lanes point into its own images.
struct LaneGroup {
  LaneGroup() = default;
  LaneGroup(const LaneGroup&) = delete;
  LaneGroup& operator=(const LaneGroup&) = delete;

  std::vector<std::unique_ptr<CommRun>> comms;
  std::vector<LaneRun> runs;
  // Which calls address each other's buffers: it depends on more than the
  // cache key (the calls' reductions and numbers), so a kept group is rerun
  // only for calls that decide alike.
  PeerAccessGroups peerAccess;
  // Which of its bridged messages skip the lanes' copies, for the buffers
  // it last ran on.
  ZeroCopy zeroCopy;
};

// The group's peer access (the host runner runs every lane of it).
PeerAccessGroups hostPeerAccess(const std::vector<engine::Task>& tasks);

// Plans `tasks`, connects the FIFOs their lanes need (for every communicator
// of the group at once) and lays the lanes out, resumable, ready to run.
Result prepareLaneGroup(const std::vector<engine::Task>& tasks, LaneGroup* group);

// Points a cached group at these calls' buffers, reductions and operation
// numbers (the calls of its key, in order; the same peer access).
void rebindLaneGroup(LaneGroup& group, const std::vector<engine::Task>& tasks);

// The peer a lane's step `step` waits for (receive first), or -1.
int peerOfStep(const LaneRun& run, uint64_t step);

}  // namespace braid::lanes
