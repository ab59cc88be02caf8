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

namespace braid {
namespace lanes {

namespace {

uint64_t stepOf(const LaneRun& run) { return exec::loadRelaxed(&run.exec->currentStep); }

bool running(const LaneRun& run) { return !run.done && stepOf(run) < run.lane->bound.steps.size(); }

// Whether the lane is stuck on `peer`: waiting to receive a message from it
// that is not (wholly) in the FIFO, or to send to it with no free slot. A
// lost peer's messages already in shared memory stay readable, so a rank that
// has them finishes instead of failing. The lane publishes what it waits for
// in one word (waitingOn), so a lane that just got its message is never
// judged by the next one. (An LL message whose sender died halfway is left to
// the timeout when the line the lane polls is one of those that came.)
bool waitsOn(const LaneRun& run, int peer, PortKey* key = nullptr) {
  if (run.done) return false;
  const exec::WaitTarget t = exec::waitTargetOf(exec::loadRelaxed(&run.exec->waitingOn));
  if (!t.waiting) return false;
  const auto& peers = t.send ? run.lane->bound.sendPeers : run.lane->bound.recvPeers;
  if (t.port >= peers.size() || peers[t.port] != peer || exec::awaitedReady(*run.exec)) return false;
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
    if (run.owner->comm == comm && running(run)) return peerOfStep(run, stepOf(run));
  return -1;
}

void summarizeComm(const LaneGroup& group, ncclComm* comm) {
  WaitReport mine{comm->rank, firstWaitedPeer(group, comm), comm->opCount};
  // Rank 0 waits for the reports at most 3 s, and never longer than the
  // timeout itself: a short timeout asks for a prompt answer.
  const double wait = std::min(3.0, comm->settings.timeoutSeconds);
  const Deadline deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(wait * 1000));
  if (comm->rank != 0) {
    (void)comm->bootstrap->send(0, kTagDiagnosis, &mine, sizeof mine);
    return;
  }
  std::vector<int> missing, behind, waitingRanks;
  for (int r = 1; r < comm->nranks; ++r) {
    WaitReport rep;
    if (!comm->bootstrap->recv(r, kTagDiagnosis, &rep, sizeof rep, deadline).ok()) {
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

}  // namespace

std::string describeLane(const LaneRun& run, uint64_t step) {
  const auto& bound = run.lane->bound;
  std::string d = "lane on channel " + std::to_string(bound.channel) + ", step " + std::to_string(step + 1) +
                  " of " + std::to_string(bound.steps.size());
  if (step < bound.steps.size()) {
    const exec::ExecStep& s = bound.steps[step];
    d += std::string(" (") + stepKindName(s.kind) + ", " + collectiveName(run.owner->tasks[s.op].coll) + ")";
    const int peer = peerOfStep(run, step);
    if (peer >= 0) d += " with rank " + std::to_string(peer);
  }
  return d;
}

std::string describeWaits(const std::vector<LaneRun>& runs) {
  std::string out;
  for (const LaneRun& run : runs) {
    if (!running(run)) continue;
    const ncclComm* comm = run.owner->comm;
    const PeerInfo& self = comm->peers[size_t(comm->rank)];
    const uint64_t at = stepOf(run);
    const exec::ExecStep& s = run.lane->bound.steps[at];
    const Task& t = run.owner->tasks[s.op];
    char line[400];
    snprintf(line, sizeof line,
             "braid diagnosis: rank %d of %d (pid %d on host %.64s): op #%llu %s(count=%zu, %s): lane on "
             "channel %d step %llu of %zu (%s, %llu elements) waits %s rank %d\n",
             comm->rank, comm->nranks, self.pid, self.hostname, static_cast<unsigned long long>(t.sequence),
             collectiveName(t.coll), t.count, typeName(t.type), run.lane->bound.channel,
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

LaneWatchdog::LaneWatchdog(const LaneGroup& group) : group_(group), diagnosisSeen_(diagnosisRequests()) {}

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
    for (const auto& c : group_.comms) deadline_ = std::min(deadline_, deadlineFromNow(c->comm));
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
    if (c->comm->bootstrap && c->comm->bootstrap->pollFailure(&notice)) return noticed(c->comm, notice);
  }
  probeWhenStalled(now);
  Stop probed = answerProbes();
  if (!probed.why.ok()) return probed;
  for (const auto& c : group_.comms) {
    ncclComm* comm = c->comm;
    Result lost;
    int peer = -1;
    if (const NetBridge* bridge = comm->hostLanes->ports.bridge())
      for (auto& [p, why] : bridge->closedReceivers())
        if (lost.ok() && waitedOn(comm, p)) lost = why, peer = p;
    // A process that is gone matters only where its FIFO is in shared memory:
    // a bridged one may still hold what it sent before it exited (in the
    // socket), and the bridge reports the closed connection once that is
    // consumed (above).
    const PeerInfo& self = comm->peers[size_t(comm->rank)];
    for (const PeerInfo& info : comm->peers)
      if (lost.ok() && info.processId != self.processId && waitedOnInMemory(comm, info.rank) &&
          peerProcessGone(self, info))
        lost = checkPeerProcess(self, info, "running a lane"), peer = info.rank;
    if (lost.ok()) continue;
    std::string notice;
    ncclComm* from = nullptr;
    if (lost.code() == ncclRemoteError && awaitFailureNotice({comm}, kNoticeGrace, &from, &notice))
      return stop(comm, failureNoticeError(comm->rank, notice + " (afterwards this rank saw: " + lost.message() + ")"));
    return stop(comm, lost.context("rank " + std::to_string(comm->rank)), peer, true);
  }
  return {};
}

// A notice from another rank. One saying that this rank sent a message of
// another call is answered with this rank's call, so that every rank can
// name both sides.
Stop LaneWatchdog::noticed(ncclComm* comm, const std::string& first) const {
  MismatchNotice n;
  bool named = false;
  for (const std::string& notice : comm->bootstrap->failureNotices())
    if (parseMismatchNotice(notice, &n) && n.kind == MismatchNotice::Received && n.sender == comm->rank) {
      named = true;
      break;
    }
  if (!named) return stop(comm, failureNoticeError(comm->rank, first));
  const MismatchNotice pair = answerOf(comm, n);
  Stop s = stop(comm, fail(ncclInvalidUsage, "%s", pair.text.c_str()), -1, true);
  s.notice = encodeMismatchNotice(pair);
  return s;
}

// Probes from stalled ranks (engine/call_probe.h); a mismatch they show was
// told to every rank already.
Stop LaneWatchdog::answerProbes() const {
  for (const auto& c : group_.comms) {
    Stall stall;
    stall.long_ = probed_;
    stall.waitsOn = [this, comm = c->comm](int peer) { return waitedOn(comm, peer); };
    for (const LaneRun& run : group_.runs) {
      if (run.owner != c.get() || !running(run)) continue;
      const uint64_t at = stepOf(run);
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
    signature = signature * 0x100000001B3ull + (run.done ? 1 : stepOf(run) * 31 + exec::loadRelaxed(&run.exec->waitingOn));
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
      if (run.owner != c.get() || !running(run) || !c->comm->bootstrap) continue;
      const uint64_t at = stepOf(run);
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
    if (!running(run)) continue;
    const uint64_t at = stepOf(run);
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
    if (run.owner->comm == comm && waitsOn(run, peer)) return true;
  return false;
}

bool LaneWatchdog::waitedOnInMemory(ncclComm* comm, int peer) const {
  PortKey key;
  for (const LaneRun& run : group_.runs)
    if (run.owner->comm == comm && waitsOn(run, peer, &key) && !comm->hostLanes->ports.isRemote(comm, key)) return true;
  return false;
}

}  // namespace lanes
}  // namespace braid
