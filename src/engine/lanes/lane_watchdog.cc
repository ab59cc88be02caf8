#include "engine/lanes/lane_watchdog.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "base/diagnosis_signal.h"
#include "base/process_liveness.h"
#include "bootstrap/bootstrap.h"
#include "engine/call_probe.h"
#include "engine/comm.h"
#include "engine/connect.h"
#include "engine/fingerprint.h"
#include "engine/lanes/host_lanes.h"

namespace braid::lanes {

namespace {

// What a lane shows: its own words on the host, its beacon where the host
// cannot read those (a plan kernel's lane).
uint64_t stepOf(const LaneRun& run) {
  return executor::loadRelaxed(run.beacon ? &run.beacon->step : &run.exec->currentStep);
}
uint64_t waitingOnOf(const LaneRun& run) {
  return executor::loadRelaxed(run.beacon ? &run.beacon->waitingOn : &run.exec->waitingOn);
}

// The step a running lane is at, read once: a plan kernel's lane moves while
// the watch looks, and a second read may be past its last step (an index out
// of range; a crash on the fake runtime). False when it is not running.
bool runningAt(const LaneRun& run, uint64_t* at) {
  if (run.done) return false;
  *at = stepOf(run);
  return *at < run.lane->bound.steps.size();
}

// Whether the lane is stuck on `peer`: waiting to receive a message from it
// that is not (wholly) in the FIFO, or to send to it with no free slot. A
// lost peer's messages already in shared memory stay readable, so a rank that
// has them finishes instead of failing. The lane publishes what it waits for
// in one word (waitingOn), so a lane that just got its message is never
// judged by the next one. (An LL message whose sender died halfway is left to
// the timeout when the line the lane polls is one of those that came.)
// A lane seen through its beacon waits when the beacon beat since the
// watchdog's last look with the lane at the same place (`stillPolls`).
bool waitsOn(const LaneRun& run, bool stillPolls, int peer, PortKey* key = nullptr) {
  if (run.done) return false;
  const executor::WaitTarget t = executor::waitTargetOf(waitingOnOf(run));
  if (!t.waiting) return false;
  const auto& peers = t.send ? run.lane->bound.sendPeers : run.lane->bound.recvPeers;
  if (t.port >= peers.size() || peers[t.port] != peer) return false;
  if (run.beacon ? !stillPolls : executor::awaitedReady(*run.exec)) return false;
  if (key) *key = t.send ? run.lane->sendKey(t.port) : run.lane->recvKey(t.port);
  return true;
}

// Lanes that stay put this long probe the ranks they wait on (engine/call_probe.h).
constexpr auto kStallBeforeProbe = std::chrono::seconds(1);

// What one rank tells rank 0 after a timeout.
struct WaitReport {
  int32_t rank = -1;
  int32_t waitingFor = -1;  // the peer it waits on, -1 if none
  uint64_t opCount = 0;     // operations it has issued on this communicator
};

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

int firstWaitedPeer(const LaneGroup& group, const ncclComm* comm) {
  for (const LaneRun& run : group.runs)
    if (uint64_t at = 0; run.owner->comm == comm && runningAt(run, &at)) return peerOfStep(run, at);
  return -1;
}

void summarizeComm(const LaneGroup& group, ncclComm* comm) {
  WaitReport mine{comm->rank, firstWaitedPeer(group, comm), comm->opCount};
  // Rank 0 waits for the reports at most 3 s, and never longer than the
  // timeout itself: a short timeout asks for a prompt answer.
  const double wait = std::min(3.0, comm->settings.timeoutSeconds);
  const Deadline deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(wait * 1000));
  if (comm->rank != 0) {
    (void)comm->bootstrap->send(0, bootstrap::kTagDiagnosis, &mine, sizeof mine);
    return;
  }
  std::vector<int> missing, behind, waitingRanks;
  for (int r = 1; r < comm->nranks; ++r) {
    WaitReport rep;
    if (!comm->bootstrap->recv(r, bootstrap::kTagDiagnosis, &rep, sizeof rep, deadline).ok()) {
      missing.push_back(r);
    } else if (rep.opCount < mine.opCount) {
      behind.push_back(r);
    } else {
      waitingRanks.push_back(r);
    }
  }
  fprintf(stderr, "braid timeout summary (rank 0, op #%llu of a %d-rank communicator): %s%s%s%s%s%s\n",
          static_cast<unsigned long long>(mine.opCount), comm->nranks,
          missing.empty() ? "" : "never arrived (no report: dead, or hung outside braid): ranks ",
          rankList(missing).c_str(), behind.empty() ? "" : "; still at an earlier operation: ranks ",
          rankList(behind).c_str(), waitingRanks.empty() ? "" : "; waiting like rank 0: ranks ",
          rankList(waitingRanks).c_str());
}

uint64_t failedStepOf(const LaneRun& run) {
  return run.beacon ? executor::loadRelaxed(&run.beacon->step) : run.exec->failedStep;
}
uint32_t receivedFingerprintOf(const LaneRun& run) {
  return uint32_t(run.beacon ? executor::loadRelaxed(&run.beacon->receivedFingerprint) : run.exec->receivedFingerprint);
}

// How long a rank that got a message of another call waits for its sender to
// name its own call: a sender still in its call answers within a watchdog
// round or two; one that has finished it cannot.
constexpr auto kPairWait = std::chrono::milliseconds(500);

// The sender's answer to a mismatch this rank saw, naming both calls; `why`
// when none came in time. Meanwhile this rank answers the ranks that got a
// message of another call from it (in a ring, the next one did), as a rank
// still running does from its watchdog.
Result pairedMismatch(const Stop& stop) {
  ncclComm* comm = stop.comm;
  bootstrap::Bootstrap& bootstrap = *comm->bootstrap;
  const Clock::time_point until = Clock::now() + kPairWait;
  std::vector<bool> answered(size_t(comm->nranks), false);
  bootstrap::MismatchNotice n;
  while (Clock::now() < until) {
    for (const std::string& notice : bootstrap.failureNotices()) {
      if (!parseMismatchNotice(notice, &n)) continue;
      if (n.kind == bootstrap::MismatchNotice::Paired && n.sender == stop.pairFrom && n.reporter == comm->rank)
        return fail(ncclInvalidUsage, "%s", n.text.c_str());
      if (n.kind != bootstrap::MismatchNotice::Received || n.sender != comm->rank || n.reporter < 0 ||
          n.reporter >= comm->nranks || answered[size_t(n.reporter)])
        continue;
      answered[size_t(n.reporter)] = true;
      bootstrap.notifyFailure(encodeMismatchNotice(engine::answerOf(comm, n)), -1,
                              Clock::now() + std::chrono::seconds(1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return fail(ncclInvalidUsage, "%s; rank %d did not name its call within 0.5 s (it may have finished it)",
              stop.why.message().c_str(), stop.pairFrom);
}

// Whether a lane of the group (of `comm` alone, where given) has a beacon.
bool anyBeacon(const std::vector<LaneRun>& runs, const ncclComm* comm = nullptr) {
  return std::any_of(runs.begin(), runs.end(), [&](const LaneRun& r) {
    return r.beacon != nullptr && (comm == nullptr || r.owner->comm == comm);
  });
}

}  // namespace

// The error of a lane that ended with a failure.
Stop laneFailure(const lanes::LaneRun& run) {
  ncclComm* comm = run.owner->comm;
  const uint32_t at = uint32_t(failedStepOf(run));
  const std::string where = "rank " + std::to_string(comm->rank) + ", " + describeLane(run, at);
  switch (run.status) {
    case executor::ExecStatus::Aborted:
      return {fail(ncclSystemError, "communicator aborted (%s)", where.c_str()), comm};
    case executor::ExecStatus::FingerprintMismatch: {
      if (at >= run.lane->bound.steps.size())  // never from a lane that failed at a step of its own
        return {fail(ncclInternalError, "engine: %s: a mismatch past the lane's last step", where.c_str()), comm};
      // The other ranks hear of it (and the sender answers with its call).
      const int sender = peerOfStep(run, at);
      const engine::Task& t = run.owner->tasks[run.lane->bound.steps[at].op];
      bootstrap::MismatchNotice n;
      n.sender = sender;
      n.reporter = comm->rank;
      n.fingerprint = receivedFingerprintOf(run);
      n.operation = t.sequence;
      n.text = calledText(comm, t);
      Stop s{fail(ncclInvalidUsage, "%s (%s)", mismatchText(n).c_str(), where.c_str()), comm, -1, true};
      s.notice = encodeMismatchNotice(n);
      s.pairFrom = sender;
      return s;
    }
    case executor::ExecStatus::SizeMismatch:
      return {fail(ncclInvalidUsage, "%s: rank %d sent a message of another size than this step expects: the "
                   "ranks called different operations or counts", where.c_str(), peerOfStep(run, at)), comm};
    default:
      return {fail(ncclInternalError, "engine: %s: %s", where.c_str(), executor::execStatusName(run.status)), comm};
  }
}

Result reportStop(const Stop& stop) {
  if (stop.why.ok()) return Result::success();
  if (!stop.notify || !stop.comm || !stop.comm->bootstrap) return stop.why;
  stop.comm->bootstrap->notifyFailure(stop.notice.empty() ? stop.why.message() : stop.notice, stop.lostPeer,
                                      Clock::now() + std::chrono::seconds(1));
  return stop.pairFrom >= 0 ? pairedMismatch(stop) : stop.why;
}

std::string describeLane(const LaneRun& run, uint64_t step) {
  const auto& bound = run.lane->bound;
  std::string d = "lane on channel " + std::to_string(bound.channel) + ", step " + std::to_string(step + 1) +
                  " of " + std::to_string(bound.steps.size());
  if (step < bound.steps.size()) {
    const executor::ExecStep& s = bound.steps[step];
    d += std::string(" (") + stepKindName(s.kind) + ", " + collectiveName(run.owner->tasks[s.op].coll) + ")";
    const int peer = peerOfStep(run, step);
    if (peer >= 0) d += " with rank " + std::to_string(peer);
  }
  return d;
}

std::string describeWaits(const std::vector<LaneRun>& runs) {
  std::string out;
  for (const LaneRun& run : runs) {
    uint64_t at = 0;
    if (!runningAt(run, &at)) continue;
    const ncclComm* comm = run.owner->comm;
    const PeerInfo& self = comm->peers[size_t(comm->rank)];
    const executor::ExecStep& s = run.lane->bound.steps[at];
    const engine::Task& t = run.owner->tasks[s.op];
    char line[400];
    snprintf(line, sizeof line,
             "braid diagnosis: rank %d of %d (pid %d on host %.64s): op #%llu %s(count=%zu, %s): lane on "
             "channel %d step %llu of %zu (%s, %llu elements) waits %s rank %d\n",
             comm->rank, comm->nranks, self.pid, self.hostname, static_cast<unsigned long long>(t.sequence),
             collectiveName(t.coll), t.count, reduce::typeName(t.type), run.lane->bound.channel,
             static_cast<unsigned long long>(at + 1), run.lane->bound.steps.size(), stepKindName(s.kind),
             static_cast<unsigned long long>(s.count), s.recvPort >= 0 ? "for data from" : "to send to",
             peerOfStep(run, at));
    out += line;
  }
  if (out.empty()) out = "braid diagnosis: every lane is done; waiting for sends to leave this process\n";
  return out;
}

void summarizeTimeout(const LaneGroup& group) {
  for (const auto& c : group.comms)
    if (c->comm->bootstrap) summarizeComm(group, c->comm);
}

LaneWatchdog::LaneWatchdog(const LaneGroup& group, uint64_t diagnosisSeen)
    : group_(group), diagnosisSeen_(diagnosisSeen) {}

Stop LaneWatchdog::stop(ncclComm* comm, Result why, int lostPeer, bool notify) const {
  return {std::move(why), comm, lostPeer, notify};
}

Stop LaneWatchdog::check() {
  for (const auto& c : group_.comms)
    if (c->comm->abortFlag.load(std::memory_order_relaxed) != 0) return stuck("communicator aborted");
  const Clock::time_point now = Clock::now();
  // Taken at the first check, once waiting got long: reading the clock on
  // every call would cost a small call a tenth of its time.
  if (deadline_ == Clock::time_point::min()) {
    deadline_ = Clock::time_point::max();
    for (const auto& c : group_.comms) deadline_ = std::min(deadline_, engine::deadlineFromNow(c->comm));
  }
  if (now > deadline_) {
    // Printed whatever NCCL_DEBUG says: a hang is what the user needs to see.
    fprintf(stderr, "%s", describeWaits(group_.runs).c_str());
    summarizeTimeout(group_);
    return stuck("timed out (BRAID_TIMEOUT)");
  }
  if (diagnosisRequests() != diagnosisSeen_) {
    diagnosisSeen_ = diagnosisRequests();
    fprintf(stderr, "%s", describeWaits(group_.runs).c_str());
  }
  if (now < nextPeerCheck_) return {};
  nextPeerCheck_ = now + std::chrono::milliseconds(100);
  // Notices first: they name the rank that failed first.
  for (const auto& c : group_.comms) {
    std::string notice;
    if (!c->comm->bootstrap || !c->comm->bootstrap->pollFailure(&notice)) continue;
    if (!laterOperation(*c, notice)) return noticed(c->comm, notice);
    for (const std::string& other : c->comm->bootstrap->failureNotices())
      if (!laterOperation(*c, other)) return noticed(c->comm, other);
  }
  probeWhenStalled(now);
  Stop probed = answerProbes();
  if (!probed.why.ok()) return probed;
  notePolling();
  for (const auto& c : group_.comms) {
    ncclComm* comm = c->comm;
    Result lost;
    int peer = -1;
    // A failed send (plan kernels: their bridge's pump cannot say it), then
    // a closed connection a lane waits on.
    if (const NetBridge* bridge = c->ports->bridge()) {
      lost = bridge->error();
      for (auto& [p, why] : bridge->closedReceivers())
        if (lost.ok() && waitedOn(comm, p)) lost = why, peer = p;
    }
    // A process that is gone matters only where its FIFO is in shared memory:
    // a bridged one may still hold what it sent before it exited (in the
    // socket), and the bridge reports the closed connection once that is
    // consumed (above).
    const PeerInfo& self = comm->peers[size_t(comm->rank)];
    for (const PeerInfo& info : comm->peers)
      if (lost.ok() && info.processId != self.processId && lostInMemory(comm, self, info))
        lost = checkPeerProcess(self, info, "running a lane"), peer = info.rank;
    if (lost.ok()) continue;
    std::string notice;
    ncclComm* from = nullptr;
    if (lost.code() == ncclRemoteError && engine::awaitFailureNotice({comm}, engine::kNoticeGrace, &from, &notice))
      return stop(comm, bootstrap::failureNoticeError(comm->rank,
                                                      notice + " (afterwards this rank saw: " + lost.message() + ")"));
    return stop(comm, lost.context("rank " + std::to_string(comm->rank)), peer, true);
  }
  return {};
}

// A mismatch seen in an operation after every one this communicator runs in
// the group does not stop the group (engine/call_probe.h).
bool LaneWatchdog::laterOperation(const CommRun& c, const std::string& notice) const {
  uint64_t last = 0;
  for (const engine::Task& t : c.tasks) last = std::max(last, t.sequence);
  return engine::concernsALaterCall(c.comm, notice, last);
}

// A notice from another rank. One saying that this rank sent a message of
// another call is answered with this rank's call, so that every rank can
// name both sides.
Stop LaneWatchdog::noticed(ncclComm* comm, const std::string& first) const {
  bootstrap::MismatchNotice n;
  bool named = false;
  for (const std::string& notice : comm->bootstrap->failureNotices())
    if (parseMismatchNotice(notice, &n) && n.kind == bootstrap::MismatchNotice::Received && n.sender == comm->rank) {
      named = true;
      break;
    }
  if (!named) return stop(comm, bootstrap::failureNoticeError(comm->rank, first));
  const bootstrap::MismatchNotice pair = engine::answerOf(comm, n);
  Stop s = stop(comm, fail(ncclInvalidUsage, "%s", pair.text.c_str()), -1, true);
  s.notice = encodeMismatchNotice(pair);
  return s;
}

// Probes from stalled ranks (engine/call_probe.h); a mismatch they show was
// told to every rank already.
Stop LaneWatchdog::answerProbes() const {
  for (const auto& c : group_.comms) {
    engine::Stall stall;
    stall.long_ = probed_;
    stall.waitsOn = [this, comm = c->comm](int peer) { return waitedOn(comm, peer); };
    for (const LaneRun& run : group_.runs) {
      uint64_t at = 0;
      if (run.owner != c.get() || !runningAt(run, &at)) continue;
      stall.task = &c->tasks[run.lane->bound.steps[at].op];
      stall.waitingFor = peerOfStep(run, at);
      break;
    }
    stall.at = currentCallText(c->comm, stall.task);
    Result r = answerCallProbes(c->comm, stall);
    if (!r.ok()) return stop(c->comm, std::move(r));
  }
  return {};
}

// Once the lanes have not moved for kStallBeforeProbe, each communicator's
// first waiting lane in a collective tells the rank it waits on which call it
// is in (answerProbes, there).
void LaneWatchdog::probeWhenStalled(Clock::time_point now) {
  uint64_t signature = 0;
  for (const LaneRun& run : group_.runs)
    signature = signature * 0x100000001B3ull + (run.done ? 1 : stepOf(run) * 31 + waitingOnOf(run));
  if (signature != stallSignature_ || stallSince_ == Clock::time_point::min()) {
    stallSignature_ = signature;
    stallSince_ = now;
    probed_ = false;
    return;
  }
  if (probed_ || now - stallSince_ < kStallBeforeProbe) return;
  probed_ = true;
  for (const auto& c : group_.comms) {
    for (const LaneRun& run : group_.runs) {
      uint64_t at = 0;
      if (run.owner != c.get() || !runningAt(run, &at) || !c->comm->bootstrap) continue;
      const int peer = peerOfStep(run, at);
      if (peer < 0) continue;
      sendCallProbe(c->comm, peer, &c->tasks[run.lane->bound.steps[at].op]);
      break;
    }
  }
}

// Names the first lane still waiting, and whom it waits for.
Stop LaneWatchdog::stuck(const char* why) const {
  for (const LaneRun& run : group_.runs) {
    uint64_t at = 0;
    if (!runningAt(run, &at)) continue;
    ncclComm* comm = run.owner->comm;
    return stop(comm, fail(ncclSystemError, "rank %d: %s while waiting for rank %d (%s); that rank may have died, "
                           "hung, or called a different operation", comm->rank, why, peerOfStep(run, at),
                           describeLane(run, at).c_str()));
  }
  ncclComm* comm = group_.comms.front()->comm;
  return stop(comm, fail(ncclSystemError, "rank %d: %s while flushing sends to peers", comm->rank, why));
}

bool LaneWatchdog::waitedOn(const ncclComm* comm, int peer) const {
  for (const LaneRun& run : group_.runs)
    if (run.owner->comm == comm && waitsOn(run, stillPolls(run), peer)) return true;
  return false;
}

bool LaneWatchdog::waitedOnInMemory(ncclComm* comm, int peer) const {
  PortKey key;
  for (const LaneRun& run : group_.runs)
    if (run.owner->comm == comm && waitsOn(run, stillPolls(run), peer, &key) && !run.owner->ports->isRemote(comm, key))
      return true;
  return false;
}

// The order matters: a peer that sends its last message and exits at once
// must not be blamed by a look at the wait taken before the message came.
// Only a peer a lane waits on is worth reading /proc for; once seen gone, it
// writes nothing more: a host lane's wait, read again live from its FIFO,
// then says for good whether it still waits on the peer. A beacon lane's
// look is from before this check, so a peer gone is blamed only at a later
// check, where the lane still polls for it (one peer check, 100 ms, later).
bool LaneWatchdog::lostInMemory(ncclComm* comm, const PeerInfo& self, const PeerInfo& peer) {
  if (!waitedOnInMemory(comm, peer.rank) || !peerProcessGone(self, peer)) return false;
  const bool seenBefore = !seenGone_.insert({comm, peer.rank}).second;
  return (seenBefore || !anyBeacon(group_.runs, comm)) && waitedOnInMemory(comm, peer.rank);
}

// Where each beacon lane is, and its beat: a lane at the same place whose
// beacon beat since the last look still polls that wait.
void LaneWatchdog::notePolling() {
  // Host lanes have no beacon: nothing to note, and nothing allocated for
  // them (a small call that waited long enough for a look stays allocation-free).
  if (!anyBeacon(group_.runs)) return;
  looks_.resize(group_.runs.size());
  for (size_t i = 0; i < group_.runs.size(); ++i) {
    const LaneRun& run = group_.runs[i];
    if (!run.beacon) continue;
    const Look now{stepOf(run), waitingOnOf(run), executor::loadRelaxed(&run.beacon->beats), false};
    Look& last = looks_[i];
    const bool polls = now.step == last.step && now.waitingOn == last.waitingOn && now.beats != last.beats;
    last = now;
    last.polls = polls;
  }
}

bool LaneWatchdog::stillPolls(const LaneRun& run) const {
  const size_t i = size_t(&run - group_.runs.data());
  return i < looks_.size() && looks_[i].polls;
}

}  // namespace braid::lanes
