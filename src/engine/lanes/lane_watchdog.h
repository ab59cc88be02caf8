// The one watchdog and diagnosis of running lanes: the communicators' abort,
// BRAID_TIMEOUT (with rank 0's timeout summary), SIGUSR1, failure notices from
// other ranks, the network bridge's errors, and a peer process that died while
// a lane waits on it (judged by the message the lane publishes it waits for).
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "engine/lanes/lane_group.h"
#include "transports/transport.h"

namespace braid::lanes {

// Why a group stopped. `notify`: this rank saw a peer go (lostPeer, or -1
// when it cannot tell which), or a message of another call, and tells the
// other ranks (`notice`, else why's message), so that those waiting on someone
// else fail within moments instead of at their timeout; a notice this rank
// only received is not passed on, except by the rank a mismatch notice names
// as the sender, which answers with its own call. `pairFrom`: the rank whose
// answer names the other side of a mismatch this rank saw.
struct Stop {
  Stop(Result why = Result::success(), ncclComm* comm = nullptr, int lostPeer = -1, bool notify = false)
      : why(std::move(why)), comm(comm), lostPeer(lostPeer), notify(notify) {}
  Result why;
  ncclComm* comm = nullptr;
  int lostPeer = -1;
  bool notify = false;
  std::string notice;
  int pairFrom = -1;
};

// The error of a lane that ended with a failure (run.status), told to the
// other ranks where they would otherwise wait for this one.
Stop laneFailure(const LaneRun& run);

// Tells the other ranks why the group stopped where `stop` says so and, for a
// message of another call, waits briefly for its sender to name its call;
// returns the error for this rank (success when stop.why is).
Result reportStop(const Stop& stop);

// One "braid diagnosis:" line per lane still running.
std::string describeWaits(const std::vector<LaneRun>& runs);

// "lane on channel C, step i of n (kind, Collective) with rank P".
std::string describeLane(const LaneRun& run, uint64_t step);

class LaneWatchdog {
 public:
  // diagnosisSeen: diagnosisRequests() when the group began to run (a
  // SIGUSR1 since then is answered at the first check).
  LaneWatchdog(const LaneGroup& group, uint64_t diagnosisSeen);
  // Every lane may go on (why is success), or why the group must stop.
  Stop check();

 private:
  bool waitedOn(const ncclComm* comm, int peer) const;
  // A lane waits on `peer` through a FIFO in shared memory (not bridged).
  bool waitedOnInMemory(ncclComm* comm, int peer) const;
  // `peer`'s process is gone and a lane of `comm` waits on it in shared
  // memory, seen in that order (see the definition).
  bool lostInMemory(ncclComm* comm, const PeerInfo& self, const PeerInfo& peer);
  Stop stuck(const char* why) const;
  Stop noticed(ncclComm* comm, const std::string& first) const;
  bool laterOperation(const CommRun& c, const std::string& notice) const;
  Stop answerProbes() const;
  void probeWhenStalled(Clock::time_point now);
  void notePolling();
  bool stillPolls(const LaneRun& run) const;
  Stop stop(ncclComm* comm, Result why, int lostPeer = -1, bool notify = false) const;

  const LaneGroup& group_;
  Deadline deadline_ = Clock::time_point::min();
  Clock::time_point nextPeerCheck_ = Clock::time_point::min();
  uint64_t diagnosisSeen_;
  // Where the lanes were when the watchdog last saw them move: lanes that
  // stay put for a second ask the ranks they wait on which call those are in.
  uint64_t stallSignature_ = 0;
  Clock::time_point stallSince_ = Clock::time_point::min();
  bool probed_ = false;
  // Beacon lanes (LaneRun::beacon) at the last peer check.
  struct Look {
    uint64_t step = 0, waitingOn = 0, beats = 0;
    bool polls = false;
  };
  std::vector<Look> looks_;
  // Peers (communicator, rank) already seen gone at an earlier peer check.
  std::set<std::pair<const ncclComm*, int>> seenGone_;
};

// After a timeout: every rank reports to rank 0 what it waits for, and rank 0
// prints which ranks never arrived, are behind, or wait like it.
void summarizeTimeout(const LaneGroup& group);

}  // namespace braid::lanes
