#include "runtime/host/executor.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "core/comm.h"
#include "runtime/host/diagnosis.h"
#include "core/log.h"

namespace braid {

namespace {

const char* at(const BoundOp& op, BufferRef ref) {
  const char* base = ref.buffer == Buffer::Input    ? op.input
                     : ref.buffer == Buffer::Output ? op.output
                                                    : op.scratch;
  return base + ref.offset * op.elemSize;
}

char* atMutable(const BoundOp& op, BufferRef ref) { return const_cast<char*>(at(op, ref)); }

// Performs the step if its slots are ready; returns false to try again later.
Result tryStep(const HostWork& work, const BoundStep& b, bool* done) {
  *done = false;
  const Step& s = b.step;
  const BoundOp& op = work.ops[b.op];
  const size_t bytes = s.count * op.elemSize;
  const void* in = nullptr;
  if (b.recv) {
    size_t got = 0;
    in = b.recv->peek(&got);
    if (!in) {
      // Only a connection this lane waits on is read: a peer that finished and
      // closed its end is no error unless data is still expected from it.
      BRAID_TRY(b.recv->progress());
      in = b.recv->peek(&got);
      if (!in) return Result::success();
    }
    if (got != bytes)
      return fail(ncclInvalidUsage,
                  "expected %zu bytes from rank %d but received %zu: the ranks called "
                  "different operations or counts",
                  bytes, s.recvPeer, got);
  }
  void* out = nullptr;
  if (b.send) {
    out = b.send->acquire();
    if (!out) return Result::success();
  }
  switch (s.kind) {
    case StepKind::Send:
      hostCopy(op.op, out, at(op, s.src), s.count, s.srcIsContribution, false);
      break;
    case StepKind::Recv:
      memcpy(atMutable(op, s.dst), in, bytes);
      break;
    case StepKind::RecvReduceSend:
      hostReduce(op.op, out, in, at(op, s.src), s.count, s.srcIsContribution, s.final);
      break;
    case StepKind::RecvReduceCopy:
      hostReduce(op.op, atMutable(op, s.dst), in, at(op, s.src), s.count, s.srcIsContribution, s.final);
      break;
    case StepKind::RecvReduceCopySend:
      hostReduce(op.op, atMutable(op, s.dst), in, at(op, s.src), s.count, s.srcIsContribution, s.final);
      memcpy(out, at(op, s.dst), bytes);
      break;
    case StepKind::RecvCopySend:
      memcpy(out, in, bytes);
      memcpy(atMutable(op, s.dst), in, bytes);
      break;
    case StepKind::Copy:
      if (s.srcIsContribution || s.final || at(op, s.src) != at(op, s.dst))
        hostCopy(op.op, atMutable(op, s.dst), at(op, s.src), s.count, s.srcIsContribution, s.final);
      break;
  }
  if (b.send) b.send->post(bytes);
  if (b.recv) b.recv->release();
  *done = true;
  return Result::success();
}

// Waiting polls (CommSettings::spinPolls times), then yields the core (so that oversubscribed ranks, 8 on
// 2 cores, hand it straight to the peer they wait for), and after
// BRAID_YIELD_US of fruitless waiting sleeps, so a rank stuck on a slow peer stops
// burning a core.
class Backoff {
 public:
  explicit Backoff(const CommSettings& s)
      : spin_(static_cast<unsigned>(s.spinPolls)),
        yieldFor_(std::chrono::microseconds(s.yieldMicros)),
        sleepNs_(static_cast<long>(s.sleepNanos)) {}
  void reset() {
    idle_ = 0;
    sleeping_ = false;
  }
  void pause() {
    ++idle_;
    if (idle_ < spin_) return;
    if (idle_ == spin_) idleSince_ = Clock::now();
    // The clock is read once per 64 yields: it costs more than a yield that finds
    // no one else to run.
    if (!sleeping_ && (idle_ & 63) == 0 && Clock::now() - idleSince_ >= yieldFor_) sleeping_ = true;
    if (!sleeping_) {
      sched_yield();
      return;
    }
    timespec ts{0, sleepNs_};
    nanosleep(&ts, nullptr);
  }

 private:
  unsigned spin_;
  unsigned idle_ = 0;
  bool sleeping_ = false;
  Clock::time_point idleSince_;
  Clock::duration yieldFor_;
  long sleepNs_;
};

Result progressSends(HostWork& work) {
  for (SendConnection* c : work.sends) BRAID_TRY(c->progress());
  return Result::success();
}

bool allFlushed(const HostWork& work) {
  return std::all_of(work.sends.begin(), work.sends.end(),
                     [](const SendConnection* c) { return c->flushed(); });
}

Result stuckError(const HostWork& work, const char* why) {
  for (const LaneWork& lane : work.lanes) {
    if (lane.next >= lane.steps.size()) continue;
    const Step& s = lane.steps[lane.next].step;
    int peer = stepReceives(s.kind) ? s.recvPeer : s.sendPeer;
    return fail(ncclSystemError,
                "rank %d: %s while waiting for rank %d (%s step %zu of %zu, %zu elements); "
                "that rank may have died, hung, or called a different operation",
                lane.comm->rank, why, peer, stepKindName(s.kind), lane.next + 1, lane.steps.size(),
                s.count);
  }
  return fail(ncclSystemError, "%s while flushing sends to peers", why);
}

// Which operation (stage) each communicator's channel lanes are running. Its
// counters live in the HostWork, so a cached work reruns without allocating.
class StageTracker {
 public:
  explicit StageTracker(HostWork& work) : st_(work.stages) {
    st_.current.assign(work.ncomms, 0);
    st_.first.assign(work.ncomms + 1, 0);
    for (const LaneWork& lane : work.lanes)
      if (lane.stage >= 0) st_.first[lane.commIndex + 1] = std::max(st_.first[lane.commIndex + 1], lane.stage + 1);
    for (int c = 0; c < work.ncomms; ++c) st_.first[c + 1] += st_.first[c];
    st_.left.assign(st_.first[work.ncomms], 0);
    for (const LaneWork& lane : work.lanes)
      if (lane.stage >= 0 && !lane.steps.empty()) ++st_.left[st_.first[lane.commIndex] + lane.stage];
    for (int c = 0; c < work.ncomms; ++c) skipEmpty(c);
  }
  bool runnable(const LaneWork& lane) const {
    return lane.stage < 0 || lane.stage == st_.current[lane.commIndex];
  }
  void laneDone(const LaneWork& lane) {
    if (lane.stage < 0) return;
    --st_.left[st_.first[lane.commIndex] + lane.stage];
    skipEmpty(lane.commIndex);
  }

 private:
  void skipEmpty(int c) {
    const int stages = st_.first[c + 1] - st_.first[c];
    while (st_.current[c] < stages && st_.left[st_.first[c] + st_.current[c]] == 0) ++st_.current[c];
  }
  StageCounters& st_;
};

// When one rank fails, it tells the others and then usually aborts, which
// breaks its own connections too: a rank that sees a connection break may be
// seeing the second failure, not the first. So before blaming the peer it saw
// go, it gives a notice about an earlier loss a moment to arrive.
bool awaitFailureNotice(ncclComm* comm, std::chrono::milliseconds grace, std::string* notice) {
  if (!comm->bootstrap) return false;
  const Clock::time_point until = Clock::now() + grace;
  for (;;) {
    if (comm->bootstrap->pollFailure(notice)) return true;
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Records which peer a failing step was talking to (`peer`, or the step's own
// peer), so that the group can tell the other ranks whom the job lost.
Result failedOn(HostWork& work, const LaneWork& lane, Result r, int peer = -1) {
  std::string notice;
  if (r.code() == ncclRemoteError && awaitFailureNotice(lane.comm, std::chrono::milliseconds(200), &notice))
    return failureNoticeError(lane.comm->rank, notice + " (afterwards this rank saw: " + r.message() + ")");
  const Step& s = lane.steps[lane.next].step;
  work.failedComm = lane.comm;
  work.failedPeer = peer >= 0 ? peer : stepReceives(s.kind) ? s.recvPeer : s.sendPeer;
  return r.context("rank " + std::to_string(lane.comm->rank));
}

// What a rank checks while it waits (every 1024 idle polls): abort, its timeout,
// and every 100 ms whether the peers it waits on still live and whether another
// rank reported a lost peer. The deadline is taken only when waiting gets long:
// reading the clock per call costs a small call a tenth of its time.
class Watchdog {
 public:
  explicit Watchdog(HostWork& work) : work_(work) {}

  Result check() {
    for (const LaneWork& lane : work_.lanes)
      if (lane.comm->abortFlag) return stuckError(work_, "communicator aborted");
    const Clock::time_point now = Clock::now();
    if (deadline_ == Clock::time_point::min()) {
      deadline_ = Clock::time_point::max();
      for (const LaneWork& lane : work_.lanes) deadline_ = std::min(deadline_, deadlineFromNow(lane.comm));
    }
    if (now > deadline_) {
      // Printed whatever NCCL_DEBUG says: a hang is what the user needs to see.
      fprintf(stderr, "%s", describeWaits(work_).c_str());
      summarizeTimeout(work_);
      return stuckError(work_, "timed out (BRAID_TIMEOUT)");
    }
    if (diagnosisRequests() != diagnosisSeen_) {
      diagnosisSeen_ = diagnosisRequests();
      fprintf(stderr, "%s", describeWaits(work_).c_str());
    }
    if (now < nextPeerCheck_) return Result::success();
    nextPeerCheck_ = now + std::chrono::milliseconds(100);
    // Notices first: they name the rank that failed first.
    BRAID_TRY(pollNotices());
    return checkWaitedPeers();
  }

 private:
  Result checkWaitedPeers() {
    for (const LaneWork& lane : work_.lanes) {
      if (lane.next >= lane.steps.size()) continue;
      const BoundStep& b = lane.steps[lane.next];
      if (b.recv) {
        Result r = b.recv->checkPeer();
        if (!r.ok()) return failedOn(work_, lane, r, b.step.recvPeer);
      }
      if (b.send) {
        Result r = b.send->checkPeer();
        if (!r.ok()) return failedOn(work_, lane, r, b.step.sendPeer);
      }
    }
    return Result::success();
  }

  Result pollNotices() {
    const ncclComm* polled = nullptr;
    for (const LaneWork& lane : work_.lanes) {
      if (lane.comm == polled || !lane.comm->bootstrap) continue;
      polled = lane.comm;
      std::string notice;
      if (lane.comm->bootstrap->pollFailure(&notice)) return failureNoticeError(lane.comm->rank, notice);
    }
    return Result::success();
  }

  HostWork& work_;
  uint64_t diagnosisSeen_ = diagnosisRequests();
  Deadline deadline_ = Clock::time_point::min();
  Clock::time_point nextPeerCheck_ = Clock::time_point::min();
};

}  // namespace

Result runHostWork(HostWork& work) {
  if (work.lanes.empty()) return Result::success();
  work.failedComm = nullptr;
  work.failedPeer = -1;
  Watchdog watchdog(work);
  Backoff backoff(work.lanes.front().comm->settings);
  StageTracker stages(work);
  size_t remaining = 0;
  for (const LaneWork& lane : work.lanes) remaining += lane.steps.size();
  unsigned spins = 0;
  while (remaining > 0 || !allFlushed(work)) {
    BRAID_TRY(progressSends(work));
    bool progressed = false;
    for (LaneWork& lane : work.lanes) {
      if (lane.next >= lane.steps.size() || !stages.runnable(lane)) continue;
      // Run as many consecutive steps of a lane as are ready.
      while (lane.next < lane.steps.size()) {
        bool done = false;
        Result r = tryStep(work, lane.steps[lane.next], &done);
        if (!r.ok()) return failedOn(work, lane, r);
        if (!done) break;
        ++lane.next;
        --remaining;
        progressed = true;
      }
      if (lane.next == lane.steps.size()) stages.laneDone(lane);
    }
    if (progressed) {
      backoff.reset();
      continue;
    }
    backoff.pause();
    if (++spins % 1024 == 0) BRAID_TRY(watchdog.check());
  }
  return Result::success();
}

}  // namespace braid
