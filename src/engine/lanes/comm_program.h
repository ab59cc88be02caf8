// One communicator's calls of a group as a lane program: what the host-thread
// runner (lane_executor.cc) and the CUDA runner (engine/device/
// cuda_lane_launch.cc) both start from.
#pragma once

#include <memory>
#include <vector>

#include "base/result.h"
#include "engine/lanes/lane_program.h"
#include "engine/task.h"
#include "kernels/executor/plan_interpreter.h"

namespace braid::lanes {

struct CommProgram {
  // Shared with the watches of launches still running (never changed once
  // built): a watch keeps the lanes it reads even after the kept launch that
  // planned them is replaced.
  std::shared_ptr<const LaneProgram> program;
  std::vector<size_t> scratchOffsets;  // per call: where its Buffer::Scratch starts
  std::vector<uint32_t> shapeFingerprints;  // per call (engine/fingerprint.h)
  size_t scratchBytes = 0;
};

// FIFO slot sizes and the LL threshold of a communicator (alike on all ranks).
LaneLimits limitsOf(const ncclComm* comm);

// Who runs the lanes: host threads (the host runner) or CUDA blocks.
enum class LaneRunner { Host, Device };

// Plans `tasks` (one communicator's, in call order) and merges them into lanes
// with the protocol that suits `runner` (alike on every rank). `peerAccess`:
// the calls may address their peers' buffers (peer_access.h).
Result commProgramOf(const std::vector<const engine::Task*>& tasks, LaneRunner runner, CommProgram* out,
                     bool peerAccess = false);

// A call's buffers, reduction, wire type and message fingerprint as its lanes
// see them: its scratch at `scratch` (host memory, or the device block), its
// shape's fingerprint (CommProgram::shapeFingerprints).
executor::OpBuffers opBuffersOf(const engine::Task& t, char* scratch, uint32_t shapeFingerprint);

}  // namespace braid::lanes
