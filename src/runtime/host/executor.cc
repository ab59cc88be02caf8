#include "runtime/host/executor.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cstring>

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

// Waiting spins briefly, then yields, then sleeps, so that oversubscribed ranks
// (8 ranks on 2 cores) leave the core to the peer they wait for.
class Backoff {
 public:
  void reset() { idle_ = 0; }
  void pause() {
    ++idle_;
    if (idle_ < 64) return;
    if (idle_ < 256) {
      sched_yield();
      return;
    }
    timespec ts{0, idle_ < 2048 ? 2000 : 50000};
    nanosleep(&ts, nullptr);
  }

 private:
  unsigned idle_ = 0;
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

// Which operation (stage) each communicator's channel lanes are running.
class StageTracker {
 public:
  explicit StageTracker(const HostWork& work) : current_(work.ncomms, 0), left_(work.ncomms) {
    for (const LaneWork& lane : work.lanes) {
      if (lane.stage < 0 || lane.steps.empty()) continue;
      auto& left = left_[lane.commIndex];
      if (left.size() <= static_cast<size_t>(lane.stage)) left.resize(lane.stage + 1, 0);
      ++left[lane.stage];
    }
    for (int c = 0; c < work.ncomms; ++c) skipEmpty(c);
  }
  bool runnable(const LaneWork& lane) const {
    return lane.stage < 0 || lane.stage == current_[lane.commIndex];
  }
  void laneDone(const LaneWork& lane) {
    if (lane.stage < 0) return;
    --left_[lane.commIndex][lane.stage];
    skipEmpty(lane.commIndex);
  }

 private:
  void skipEmpty(int c) {
    while (static_cast<size_t>(current_[c]) < left_[c].size() && left_[c][current_[c]] == 0) ++current_[c];
  }
  std::vector<int> current_;
  std::vector<std::vector<int>> left_;
};

}  // namespace

Result runHostWork(HostWork& work) {
  Deadline deadline = Clock::time_point::max();
  for (const LaneWork& lane : work.lanes) deadline = std::min(deadline, deadlineFromNow(lane.comm));
  Backoff backoff;
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
        if (!r.ok()) return r.context("rank " + std::to_string(lane.comm->rank));
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
    if (++spins % 1024 == 0) {
      for (const LaneWork& lane : work.lanes)
        if (lane.comm->abortFlag) return stuckError(work, "communicator aborted");
      if (Clock::now() > deadline) return stuckError(work, "timed out (BRAID_TIMEOUT)");
    }
  }
  return Result::success();
}

}  // namespace braid
