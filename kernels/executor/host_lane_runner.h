// Host side: runs one lane in the calling thread, each step with the element
// type of its operation (typed_step.h). A lane may mix datatypes.
#pragma once

#include "kernels/executor/typed_step.h"

namespace braid::executor {

inline ExecStatus runLaneOnHost(LaneExec& L) { return runMixedLane(HostGroup(), L); }

// One turn of a lane on a thread that runs many: until it ends or, if
// resumable, would wait. *moved: whether it got anywhere (it ended, or its
// place changed), which tells the caller when to back off.
inline ExecStatus runLaneTurn(LaneExec& L, bool* moved) {
  const uint64_t step = L.currentStep, lines = L.resumeLines;
  const uint32_t phase = L.resumePhase;
  const ExecStatus st = runLaneOnHost(L);
  *moved = st != ExecStatus::WouldBlock || L.currentStep != step || L.resumeLines != lines ||
           L.resumePhase != phase;
  return st;
}

}  // namespace braid::executor
