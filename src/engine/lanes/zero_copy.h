// Messages to and from other hosts without the lanes' copies (host runner).
// A bridged FIFO's bytes already move between socket and slot in place
// (net_bridge.h); this removes the copy between slot and user buffer too:
//   - by reference: a step whose message is bytes a user buffer holds (a
//     plain Send's source; what a RecvReduceCopySend or RecvCopySend leaves
//     in its destination) posts a pointer to them (kStepSendsByReference),
//     and the bridge sends from there;
//   - placed: a message a Recv or RecvCopySend would only copy into its
//     destination is received straight into it by the bridge, which delivers
//     it by reference (NetBridge::receiveInPlace).
// Either holds a user range beyond the step, so it is chosen only where
// nothing else in the group touches that range meanwhile (decideZeroCopy):
// the steps of one lane run in order, those of different lanes in any order,
// and the bridge writes a placed range whenever its message arrives. One
// ordering the bridge adds itself: a message whose step overwrites bytes an
// earlier step of its lane sent by reference (an allreduce in place: the
// chunk a rank sent comes back reduced) is delivered, or placed, only once
// that reference has left, or was copied back into its slot. The choice
// follows the buffers' addresses, made again when they change.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "engine/lanes/net_bridge.h"
#include "kernels/executor/plan_interpreter.h"

namespace braid::lanes {

struct LaneGroup;

// Smaller messages are copied: a copy of them costs less than the bookkeeping.
constexpr uint64_t kZeroCopyMinBytes = 16 << 10;

// One step as the choice sees it: the user bytes it reads and writes, and
// whether its FIFOs are bridged.
struct ZeroCopyStep {
  uint32_t lane = 0;  // steps of a lane are listed in its order
  schedule::StepKind kind = schedule::StepKind::Copy;
  const char* reads = nullptr;   // its source range, or null
  const char* writes = nullptr;  // its destination range, or null
  uint64_t bytes = 0;            // of each range (its elements)
  bool plain = false;        // its messages are its elements as they are (no wire type)
  bool sendBridged = false;  // it sends on a bridged FIFO
  bool recvBridged = false;  // it receives on a bridged FIFO that no other lane uses
};

struct ZeroCopyDecision {
  bool byReference = false;  // posts its message by reference
  bool placed = false;       // its message is received into its destination
  // The step (by index) whose reference this step's write overwrites: its
  // message is delivered (or placed) only once that one has left. -1: none.
  int32_t after = -1;
};

// The choice for every step of a group (pure; steps of every lane, any order).
std::vector<ZeroCopyDecision> decideZeroCopy(const std::vector<ZeroCopyStep>& steps);

// The choice kept with a cached group (lane_group.h), applied before each run.
class ZeroCopy {
 public:
  // Before each run of `group`: decides again if its buffers moved (marking
  // its steps in the lanes' images), then tells each bridge where this
  // run's placed messages go.
  void prepare(LaneGroup& group);
  // After the run, `why` its failure (success: nothing to do): the bridges
  // keep no pointer into user memory and move nothing more.
  void finish(LaneGroup& group, const Result& why);

 private:
  // A message this run receives (placed, held back, or both): the nth it
  // takes from `port`; if held, until message `afterNth` of `afterPort`,
  // which step `reference` sends by reference, left.
  struct Placement {
    NetBridge* bridge;
    const executor::Port* port;
    uint64_t nth;
    char* at;  // null: not placed
    uint64_t bytes;
    const executor::Port* afterPort;  // null: not held back
    uint64_t afterNth;
    executor::ExecStep* reference;
  };
  void holdOrCopy();
  void decide(LaneGroup& group);

  bool decided_ = false;
  std::vector<const void*> buffers_;  // the addresses it was decided for
  bool active_ = false;               // some step sends by reference or is placed
  std::vector<Placement> placements_;
  bool placing_ = false;  // the bridges hold placements of this choice
  std::vector<NetBridge*> bridges_;
  std::vector<NetBridge::Placement> run_;  // one bridge's for this run (kept: no allocation per call)
};

}  // namespace braid::lanes
