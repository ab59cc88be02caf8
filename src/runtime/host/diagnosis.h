// Hang diagnosis. On SIGUSR1 (any rank, any time) and when an operation times
// out, a rank prints once what it is doing: the operations in flight with their
// sequence numbers and, per lane, the step it is on and the peer it waits for.
// On a timeout every rank also reports to rank 0, which prints a one-line
// summary naming the ranks that never arrived.
#pragma once

#include <cstdint>
#include <string>

#include "core/diagnosis_signal.h"
#include "runtime/host/executor.h"

namespace braid {

// "rank 3 (pid 77 on host a): op #57 AllReduce(count=4096, float32): lane 0 step 5 of 12
//  (RecvReduceSend) waits for data from rank 2" ..., one line per waiting lane.
std::string describeWaits(const HostWork& work);

// After a timeout: every rank reports where it is to rank 0 of each
// communicator of the work; rank 0 prints who never arrived. Bounded (a few
// seconds); best effort.
void summarizeTimeout(const HostWork& work);

}  // namespace braid
