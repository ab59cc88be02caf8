#include "engine/lanes/lane_executor.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "base/diagnosis_signal.h"
#include "base/log.h"
#include "bootstrap/bootstrap.h"
#include "engine/call_probe.h"
#include "engine/comm.h"
#include "engine/connect.h"
#include "engine/fingerprint.h"
#include "engine/lanes/host_lanes.h"
#include "engine/lanes/lane_group.h"
#include "engine/lanes/lane_watchdog.h"
#include "kernels/executor/host_lane_runner.h"
#include "reduce/host_reduce.h"

namespace braid::lanes {

namespace {

// Every lane back at its first step, every stage counter at zero.
void rewind(lanes::LaneGroup& group) {
  for (lanes::LaneRun& run : group.runs) {
    executor::rewindLane(*run.exec);
    std::fill(run.exec->stages, run.exec->stages + run.exec->nstages, 0);
    run.done = false;
    run.status = executor::ExecStatus::Ok;
  }
}

// Runs the lane until it ends or would wait; true when it got anywhere. A
// lane that waits is only re-entered once what it waits for is there.
bool turn(lanes::LaneRun& run) {
  executor::LaneExec& L = *run.exec;
  if (!executor::awaitedReady(L)) return false;
  bool moved = false;
  run.status = executor::runLaneTurn(L, &moved);
  run.done = run.status != executor::ExecStatus::WouldBlock;
  return moved;
}

// The network bridges of the group's communicators: pumped every round, and
// the group ends only once they have sent everything.
class Bridges {
 public:
  explicit Bridges(const lanes::LaneGroup& group) {
    for (const auto& c : group.comms)
      if (lanes::NetBridge* b = c->comm->hostLanes->ports.bridge()) list_.push_back({b, c->comm});
  }
  // The sockets of FIFOs a lane waits on are read in every round, the others
  // in one round of eight: a read is a system call, a FIFO poll a load.
  bool any() const { return !list_.empty(); }
  bool pump(const std::vector<lanes::LaneRun>& runs) {
    const bool readSockets = ++rounds_ % 8 == 0;
    awaited_.clear();
    if (!readSockets)
      for (const lanes::LaneRun& run : runs)
        if (const uint64_t* head = awaitedHead(run)) awaited_.push_back(head);
    bool moved = false;
    for (const Entry& e : list_) moved = e.bridge->pump(readSockets, awaited_) || moved;
    return moved;
  }
  bool flushed() const {
    for (const Entry& e : list_)
      if (!e.bridge->flushed()) return false;
    return true;
  }
  // A send that failed: the peer it went to is lost (told to the others).
  lanes::Stop failure() const {
    for (const Entry& e : list_)
      if (Result error = e.bridge->error(); !error.ok())
        return {error.context("rank " + std::to_string(e.comm->rank)), e.comm, -1, true};
    return {};
  }

 private:
  struct Entry {
    lanes::NetBridge* bridge;
    ncclComm* comm;
  };
  // The head of the FIFO a waiting lane expects a message on, or null.
  static const uint64_t* awaitedHead(const lanes::LaneRun& run) {
    if (run.done) return nullptr;
    const executor::WaitTarget t = executor::waitTargetOf(executor::loadRelaxed(&run.exec->waitingOn));
    if (!t.waiting || t.send || t.port >= run.exec->nrecvPorts) return nullptr;
    return run.exec->recvPorts[t.port]->fifo.head;
  }

  std::vector<Entry> list_;
  std::vector<const uint64_t*> awaited_;
  unsigned rounds_ = 0;
};

// A message up to this size comes within about a context switch of a sender
// that runs (its reduction at a few GB/s takes under 2 us); a larger one takes
// its sender long enough that this rank's CPU-mates may need the CPU
// meanwhile (4 ranks on 2 cores, allreduces of 32 KiB-8 MiB: 5-30% slower
// when their waits polled the long count; performance.md, 2026-12-02, third
// session).
constexpr uint64_t kQuickMessageBytes = 8 << 10;

// The bytes of the step a lane is at (0 past its last).
uint64_t stepBytes(const executor::LaneExec& L) {
  const uint64_t at = executor::loadRelaxed(&L.currentStep);
  if (at >= L.nsteps || L.steps[at].op >= L.nops) return 0;
  return L.steps[at].count * reduce::typeSize(L.ops[L.steps[at].op].op.type);
}

// How many polls the waiting lanes are worth (base/presence.h): none when no
// peer they wait for can run (it yields, or waits for this very CPU); the long
// count when one may run on another CPU and its message is quick to come; the
// short count when every such message is larger.
unsigned pollsWorth(const lanes::LaneGroup& group, const engine::PresenceBoard& board, const WaitPolicy& policy) {
  const int cpu = currentCpu();
  const auto longCount = unsigned(policy.presenceSpinPolls);
  unsigned polls = 0;
  for (const lanes::LaneRun& run : group.runs) {
    if (run.done) continue;
    const executor::LaneExec& L = *run.exec;
    const executor::WaitTarget t = executor::waitTargetOf(executor::loadRelaxed(&L.waitingOn));
    if (!t.waiting) return longCount;  // a wait on another lane of the group
    const std::vector<int32_t>& peers = t.send ? run.lane->bound.sendPeers : run.lane->bound.recvPeers;
    if (t.port >= peers.size()) return longCount;
    const PresenceSlot* slot = board.of(peers[t.port]);
    if (slot != nullptr && !mayRunElsewhere(*slot, cpu)) continue;
    if (stepBytes(L) <= kQuickMessageBytes) return longCount;
    polls = unsigned(policy.spinPolls);
  }
  return polls;
}

// Every lane in turn on this thread, and the bridges between them, until all
// are done and sent; the watchdog looks in every 1024 idle rounds.
lanes::Stop runTurns(lanes::LaneGroup& group) {
  // Made at the first look (most small calls never wait that long), minding
  // SIGUSR1 requests from the start of the run on.
  std::optional<lanes::LaneWatchdog> watchdog;
  const uint64_t diagnosisSeen = diagnosisRequests();
  Bridges bridges(group);
  ncclComm* const comm = group.comms.front()->comm;
  // Presence is heeded (and kept) by one communicator's lanes over memory
  // alone, where ranks share cores: a message a bridge may still read from a
  // socket can be there while its sender yields, and the peers of several
  // communicators driven by this thread are this thread.
  WaitPolicy policy = comm->settings.wait;
  const bool heedPresence =
      policy.presenceSpinPolls > 0 && !bridges.any() && group.comms.size() == 1 && comm->presence.self() != nullptr;
  if (heedPresence) {
    markRunning(*comm->presence.self(), currentCpu());
    policy.spinPolls = policy.presenceSpinPolls;
  }
  Backoff backoff(policy, /*slowPolls=*/bridges.any(), heedPresence ? comm->presence.self() : nullptr);
  size_t remaining = group.runs.size();
  unsigned idleRounds = 0;
  while (remaining > 0 || !bridges.flushed()) {
    bool progressed = false;
    if (bridges.any()) {
      progressed = bridges.pump(group.runs);
      lanes::Stop failed = bridges.failure();
      if (!failed.why.ok()) {
        // The peer may have failed first, and said why.
        ncclComm* from = nullptr;
        std::string notice;
        if (engine::awaitFailureNotice({failed.comm}, engine::kNoticeGrace, &from, &notice))
          return {bootstrap::failureNoticeError(from->rank, notice), from};
        return failed;
      }
    }
    for (lanes::LaneRun& run : group.runs) {
      if (run.done || !turn(run)) continue;
      progressed = true;
      if (!run.done) continue;
      --remaining;
      if (run.status != executor::ExecStatus::Ok) return lanes::laneFailure(run);
    }
    if (progressed) {
      backoff.reset();
      continue;
    }
    // At the first idle round and every 8th after it while spinning.
    if (heedPresence && backoff.spinning() && (backoff.polls() & 7) == 0 &&
        backoff.polls() + 1 >= pollsWorth(group, comm->presence, comm->settings.wait))
      backoff.stopSpinning();
    backoff.pause();
    if (++idleRounds % 1024 != 0) continue;
    if (!watchdog) watchdog.emplace(group, diagnosisSeen);
    lanes::Stop stop = watchdog->check();
    if (!stop.why.ok()) return stop;
  }
  return {};
}

// However the run ends (an exception too), the bridges keep no user pointer
// of a failed one.
class ZeroCopyRun {
 public:
  explicit ZeroCopyRun(lanes::LaneGroup& group) : group_(group) { group_.zeroCopy.prepare(group_); }
  ~ZeroCopyRun() {
    if (!ended_) group_.zeroCopy.finish(group_, fail(ncclInternalError, "the group's run ended by an exception"));
  }
  ZeroCopyRun(const ZeroCopyRun&) = delete;
  ZeroCopyRun& operator=(const ZeroCopyRun&) = delete;
  void ended(const Result& why) {
    ended_ = true;
    group_.zeroCopy.finish(group_, why);
  }

 private:
  lanes::LaneGroup& group_;
  bool ended_ = false;
};

Result runPrepared(lanes::LaneGroup& group) {
  rewind(group);
  ZeroCopyRun zeroCopy(group);
  lanes::Stop stop = runTurns(group);
  zeroCopy.ended(stop.why);
  return lanes::reportStop(stop);
}

bool oneCommunicator(const std::vector<engine::Task>& tasks) {
  return std::all_of(tasks.begin(), tasks.end(), [&](const engine::Task& t) { return t.comm == tasks.front().comm; });
}

// A group (a lone call the commonest) runs from its first communicator's
// cache; the first group of a shape plans and connects. A group over several
// communicators (one thread driving several ranks) may address its ranks'
// buffers directly, which depends on more than the shape: the kept group is
// rerun only where that decision is the same.
Result runCached(const std::vector<engine::Task>& tasks) {
  PlanCache& plans = lanes::hostLanesOf(tasks.front().comm).plans;
  const bool oneComm = oneCommunicator(tasks);
  const PeerAccessGroups peerAccess = oneComm ? PeerAccessGroups{} : lanes::hostPeerAccess(tasks);
  lanes::LaneGroup* group =
      plans.find(tasks, [&](const lanes::LaneGroup& g) { return oneComm || g.peerAccess == peerAccess; });
  if (!group) {
    auto fresh = std::make_unique<lanes::LaneGroup>();
    BRAID_TRY(lanes::prepareLaneGroup(tasks, fresh.get()));
    group = plans.insert(groupKeyOf(tasks), std::move(fresh));
  }
  lanes::rebindLaneGroup(*group, tasks);
  return runPrepared(*group);
}

}  // namespace

bool lanesShareMemoryWithEveryPeer(const std::vector<engine::Task>& tasks) {
  return std::all_of(tasks.begin(), tasks.end(),
                     [](const engine::Task& t) { return lanes::PortTable::reachable(t.comm); });
}

Result runLaneGroup(const std::vector<engine::Task>& tasks) {
  // With NCCL_DEBUG_SUBSYS=TUNING every call is planned afresh, so that each
  // one logs its choice.
  if (!logEnabled(LogLevel::Info, kLogTuning)) return runCached(tasks);
  lanes::LaneGroup group;
  BRAID_TRY(lanes::prepareLaneGroup(tasks, &group));
  return runPrepared(group);
}

}  // namespace braid::lanes
