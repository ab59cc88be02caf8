// Host side: runs one lane in the calling thread, each step with the element
// type of its operation (typed_step.h). A lane may mix datatypes.
#pragma once

#include "kernels/executor/typed_step.h"

namespace braid {
namespace exec {

inline ExecStatus runLaneOnHost(LaneExec& L) { return runMixedLane(HostGroup(), L); }

}  // namespace exec
}  // namespace braid
