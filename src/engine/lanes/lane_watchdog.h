// The one watchdog and diagnosis of running lanes: the communicators' abort,
// BRAID_TIMEOUT (with rank 0's timeout summary), SIGUSR1, failure notices from
// other ranks, the network bridge's errors, and a peer process that died while
// a lane waits on it (judged by the message the lane publishes it waits for).
#pragma once

#include <string>
#include <vector>

#include "base/result.h"
#include "engine/lanes/lane_group.h"
#include "transports/transport.h"

namespace braid {
namespace lanes {

// Why a group stopped. `notify`: this rank saw a peer go (lostPeer, or -1
// when it cannot tell which) and tells the other ranks, so that those waiting
// on someone else fail within moments instead of at their timeout; a notice
// this rank only received is not passed on.
struct Stop {
  Result why;
  ncclComm* comm = nullptr;
  int lostPeer = -1;
  bool notify = false;
};

// One "braid diagnosis:" line per lane still running.
std::string describeWaits(const std::vector<LaneRun>& runs);

// "lane on channel C, step i of n (kind, Collective) with rank P".
std::string describeLane(const LaneRun& run, uint64_t step);

class LaneWatchdog {
 public:
  explicit LaneWatchdog(const LaneGroup& group);
  // Every lane may go on (why is success), or why the group must stop.
  Stop check();

 private:
  bool waitedOn(const ncclComm* comm, int peer) const;
  // A lane waits on `peer` through a FIFO in shared memory (not bridged).
  bool waitedOnInMemory(ncclComm* comm, int peer) const;
  Stop stuck(const char* why) const;
  Stop stop(ncclComm* comm, Result why, int lostPeer = -1, bool notify = false) const;

  const LaneGroup& group_;
  Deadline deadline_ = Clock::time_point::min();
  Clock::time_point nextPeerCheck_ = Clock::time_point::min();
  uint64_t diagnosisSeen_;
};

// After a timeout: every rank reports to rank 0 what it waits for, and rank 0
// prints which ranks never arrived, are behind, or wait like it.
void summarizeTimeout(const LaneGroup& group);

}  // namespace lanes
}  // namespace braid
