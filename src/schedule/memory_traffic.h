// The memory traffic of one rank's plan: the bytes its steps read and write,
// in the user's buffers, its scratch and its FIFO slots, all of which are
// device memory for a plan kernel whose peers share its GPU. It is what bounds
// such a kernel (a GPU's memory, not a link, is the bottleneck), so it is how
// schedules for ranks on one GPU are compared (tests/schedule:
// memory_traffic_test.cc; docs/algorithms.md).
#pragma once

#include <cstddef>

#include "schedule/plan.h"

namespace braid::schedule {

struct MemoryTraffic {
  double readBytes = 0;
  double writtenBytes = 0;
  double total() const { return readBytes + writtenBytes; }
};

// Counted per step as the plan interpreter moves data with bulk FIFOs (an LL
// line carries half its bytes, so LL moves more): a message is written into
// its slot once and read from it once per use, a fused step's result is read
// back for its message, a PeerReduce reads its source at every rank
// (Step::peerSrc) and writes its destination at every rank (Step::peerDst) of
// `nranks`. A copy onto itself moves nothing.
MemoryTraffic memoryTraffic(const Plan& plan, size_t elemSize, int nranks);

}  // namespace braid::schedule
