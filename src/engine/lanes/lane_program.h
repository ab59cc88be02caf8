// One communicator's part of a group as lanes for the plan interpreter
// (kernels/executor): the plans of its operations merged into lanes that a
// host thread or a CUDA block each run from start to end.
//
//   - Peer lanes (send/recv, all-to-all, gather, scatter) with equal keys are
//     concatenated in call order, so FIFO order
//     matches on both ends.
//   - Channel lanes with equal keys and channels are concatenated too; each operation's part
//     of a lane first waits until every lane of the previous operation with
//     channel lanes has finished (a stage counter), because lanes of two
//     operations may use one FIFO.
//   - Each operation's messages use the protocol it names (LL or bulk, each
//     with FIFOs of its own). The choice is per operation, which both ends of
//     every FIFO share, so they always agree (a per-lane choice would not: a
//     lane may hold an operation on one rank that is empty, hence absent, on
//     its peer).
// Pure: no I/O, no memory of the FIFOs; the runner binds ports to FIFOs.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "kernels/executor/lane_binding.h"
#include "schedule/plan.h"

namespace braid::lanes {

struct LaneOp {
  ncclDataType_t type = ncclFloat32;
  // Its messages' protocol: alike on every rank (the planner's laneUsesLL
  // takes only inputs all ranks share), so both ends of each FIFO agree.
  executor::Protocol protocol = executor::Protocol::Bulk;
  reduce::WireType wire = reduce::WireType::None;  // Task::wire: the size of its messages
};

struct LaneLimits {
  uint64_t llPayloadBytes = 64 * 1024;    // most bytes of one LL message
  uint64_t channelPayloadBytes = 512 * 1024;  // bulk slot of channel FIFOs
  uint64_t peerPayloadBytes = 512 * 1024;     // bulk slot of per-peer FIFOs
};

// The most bytes one message may carry on a FIFO of `channel` with `protocol`:
// the size of that FIFO's slots.
uint64_t payloadBytesOf(const LaneLimits& limits, int32_t channel, executor::Protocol protocol);

// Where a lane's port leads: the FIFO (peer, channel, direction, protocol).
struct PortKey {
  int32_t peer = 0;
  int32_t channel = 0;
  bool send = false;
  executor::Protocol protocol = executor::Protocol::Bulk;
  bool operator<(const PortKey& o) const;
};

struct ProgramLane {
  executor::BoundLane bound;  // steps naming ops, ports naming (peer, protocol)
  bool anyLL = false;     // some step uses LL (the lane needs staging buffers)
  ncclDataType_t type = ncclFloat32;  // of its first operation (a lane may mix datatypes)
  PortKey sendKey(size_t port) const;
  PortKey recvKey(size_t port) const;
};

struct LaneProgram {
  std::vector<ProgramLane> lanes;
  uint32_t nstages = 0;  // stage counters the lanes use
  // Every FIFO the lanes use, once each (portsOf): listed once, where
  // connecting and writing an image read it several times a new call shape.
  std::vector<PortKey> ports;
};

// plans[i] is ops[i]'s plan at this rank. Fails (with the reason) when a step
// does not fit its FIFO's slot, or a lane would mix datatypes under
// oneTypePerLane.
Result buildLaneProgram(const std::vector<LaneOp>& ops, const std::vector<schedule::Plan>& plans,
                        const LaneLimits& limits, LaneProgram* out);

// Every FIFO the program's lanes use, once each.
inline const std::vector<PortKey>& portsOf(const LaneProgram& program) { return program.ports; }

}  // namespace braid::lanes
