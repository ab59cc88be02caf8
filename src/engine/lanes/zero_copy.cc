#include "engine/lanes/zero_copy.h"

#include <algorithm>
#include <map>

#include "base/log.h"
#include "engine/comm.h"
#include "engine/lanes/host_lanes.h"
#include "engine/lanes/lane_group.h"
#include "engine/lanes/net_bridge.h"
#include "reduce/host_reduce.h"

namespace braid::lanes {

namespace {

using schedule::StepKind;

// The user ranges the steps read and write, to find those that overlap one.
class Accesses {
 public:
  struct Access {
    uintptr_t lo, hi;
    uint32_t step;
    bool write;
  };
  void add(const char* at, uint64_t bytes, size_t step, bool write) {
    if (at == nullptr || bytes == 0) return;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(at);
    list_.push_back({lo, lo + bytes, uint32_t(step), write});
  }
  void sort() {
    std::sort(list_.begin(), list_.end(), [](const Access& a, const Access& b) { return a.lo < b.lo; });
    reach_.resize(list_.size());
    uintptr_t reach = 0;
    for (size_t i = 0; i < list_.size(); ++i) reach_[i] = reach = std::max(reach, list_[i].hi);
  }
  // f(access) for each access that overlaps [at, at + bytes): those that
  // start before its end, back to where none before reaches its start.
  template <class F>
  void forEachOverlapping(const char* at, uint64_t bytes, F f) const {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(at), hi = lo + bytes;
    size_t i = size_t(std::lower_bound(list_.begin(), list_.end(), hi,
                                       [](const Access& a, uintptr_t v) { return a.lo < v; }) -
                      list_.begin());
    while (i > 0 && reach_[i - 1] > lo) {
      --i;
      if (list_[i].hi > lo) f(list_[i]);
    }
  }

 private:
  std::vector<Access> list_;
  std::vector<uintptr_t> reach_;  // the furthest end of list_[0..i]
};

// The range a step would send by reference (null: none).
const char* referenceCandidate(const ZeroCopyStep& s) {
  if (!s.plain || !s.sendBridged || s.bytes < kZeroCopyMinBytes) return nullptr;
  if (s.kind == StepKind::Send) return s.reads;
  if (s.kind == StepKind::RecvReduceCopySend || s.kind == StepKind::RecvCopySend) return s.writes;
  return nullptr;
}

// The range a step's message would be placed in (null: none).
const char* placementCandidate(const ZeroCopyStep& s) {
  if (!s.plain || !s.recvBridged || s.bytes < kZeroCopyMinBytes) return nullptr;
  if (s.kind == StepKind::Recv || s.kind == StepKind::RecvCopySend) return s.writes;
  return nullptr;
}

// Which steps send by reference. Each other writer of a referenced range
// must be an earlier step of its lane (done before it posts), or a later one
// that writes only once its message from a bridged FIFO is there: the
// bridge holds that message back until the reference has left (`after`), at
// most one reference per message.
void chooseReferences(const std::vector<ZeroCopyStep>& steps, const Accesses& accesses,
                      std::vector<ZeroCopyDecision>* out) {
  std::vector<std::vector<uint32_t>> guarded(steps.size());  // per reference: the later writers it holds back
  std::vector<uint32_t> holds(steps.size(), 0);              // per writer: the references holding it back
  for (size_t i = 0; i < steps.size(); ++i) {
    const char* r = referenceCandidate(steps[i]);
    if (r == nullptr) continue;
    bool ok = true;
    accesses.forEachOverlapping(r, steps[i].bytes, [&](const Accesses::Access& a) {
      const size_t j = a.step;
      if (j == i || !a.write || (steps[j].lane == steps[i].lane && j < i)) return;
      if (steps[j].lane == steps[i].lane && steps[j].recvBridged && executor::stepReceivesKind(steps[j].kind)) {
        guarded[i].push_back(uint32_t(j));
      } else {
        ok = false;
      }
    });
    if (!ok) continue;
    (*out)[i].byReference = true;
    for (uint32_t j : guarded[i]) ++holds[j];
  }
  for (size_t i = 0; i < steps.size(); ++i)
    for (uint32_t j : guarded[i])
      if (holds[j] > 1) (*out)[i].byReference = false;
  for (size_t i = 0; i < steps.size(); ++i)
    if ((*out)[i].byReference)
      for (uint32_t j : guarded[i]) (*out)[j].after = int32_t(i);
}

// Which messages are received into their destination. The bridge may write
// it as soon as the message arrives: later steps of its lane run after that,
// but an earlier one or another lane's must not touch those bytes; an
// earlier Send by reference of them may, the placement waiting until it has
// left (`after`).
void choosePlacements(const std::vector<ZeroCopyStep>& steps, const Accesses& accesses,
                      std::vector<ZeroCopyDecision>* out) {
  for (size_t i = 0; i < steps.size(); ++i) {
    const char* r = placementCandidate(steps[i]);
    if (r == nullptr) continue;
    bool ok = true;
    accesses.forEachOverlapping(r, steps[i].bytes, [&](const Accesses::Access& a) {
      const size_t j = a.step;
      if (j == i || (steps[j].lane == steps[i].lane && j > i)) return;
      const bool heldReference = !a.write && steps[j].kind == StepKind::Send && (*out)[j].byReference &&
                                 (*out)[i].after == int32_t(j);
      if (!heldReference) ok = false;
    });
    (*out)[i].placed = ok;
  }
}

}  // namespace

std::vector<ZeroCopyDecision> decideZeroCopy(const std::vector<ZeroCopyStep>& steps) {
  Accesses accesses;
  for (size_t i = 0; i < steps.size(); ++i) {
    accesses.add(steps[i].writes, steps[i].bytes, i, true);
    accesses.add(steps[i].reads, steps[i].bytes, i, false);
  }
  accesses.sort();
  std::vector<ZeroCopyDecision> out(steps.size());
  chooseReferences(steps, accesses, &out);
  choosePlacements(steps, accesses, &out);
  return out;
}

namespace {

// The user bytes step `e` of a lane reads and writes, in a call's buffers.
ZeroCopyStep describe(const executor::ExecStep& e, const executor::OpBuffers& o) {
  ZeroCopyStep z;
  z.kind = e.kind;
  z.bytes = e.count * reduce::typeSize(o.op.type);
  // A Send that scales its contribution (PreMulSum) sends no bytes a buffer holds.
  z.plain = o.wire == 0 && o.fixedShifts == nullptr &&
            (e.kind != StepKind::Send || reduce::copiesAsIs(o.op, (e.flags & executor::kStepContribution) != 0, false));
  auto at = [&](schedule::Buffer b, uint64_t offset) -> const char* {
    const char* base = b == schedule::Buffer::Input ? o.input : b == schedule::Buffer::Output ? o.output : o.scratch;
    return base == nullptr ? nullptr : base + offset * reduce::typeSize(o.op.type);
  };
  switch (e.kind) {
    case StepKind::Send:
    case StepKind::RecvReduceSend: z.reads = at(e.srcBuffer, e.srcOffset); break;
    case StepKind::Recv:
    case StepKind::RecvCopySend: z.writes = at(e.dstBuffer, e.dstOffset); break;
    default:  // reduce-copies and copies read their source and write their destination
      z.reads = at(e.srcBuffer, e.srcOffset);
      z.writes = at(e.dstBuffer, e.dstOffset);
      break;
  }
  return z;
}

// Every call's buffers in the group, in order: what a decision was made for.
std::vector<const void*> buffersOf(const LaneGroup& group) {
  std::vector<const void*> key;
  for (const auto& c : group.comms)
    for (const executor::OpBuffers& o : c->ops) key.insert(key.end(), {o.input, o.output, o.scratch});
  return key;
}

// buffersOf(group) == key, without making it (a small call runs this).
bool sameBuffers(const LaneGroup& group, const std::vector<const void*>& key) {
  size_t k = 0;
  for (const auto& c : group.comms)
    for (const executor::OpBuffers& o : c->ops) {
      if (k + 3 > key.size() || key[k] != o.input || key[k + 1] != o.output || key[k + 2] != o.scratch) return false;
      k += 3;
    }
  return k == key.size();
}

bool addressesPeers(const LaneGroup& group) {
  for (const LaneRun& run : group.runs)
    for (const executor::ExecStep& e : run.lane->bound.steps)
      if (e.kind == StepKind::PeerReduce) return true;
  return false;
}

// Per communicator: bridged messages that could skip the lanes' copy, and
// those that do.
struct Counts {
  size_t sends = 0, receives = 0, byReference = 0, placed = 0;
};

// Where a step of the choice is: its lane, its index there, and which
// message it is on its send and receive ports (from 1, this run).
struct Where {
  const LaneRun* run;
  uint32_t step;
  uint64_t sendNth, recvNth;
};

// The bridge that moves this port's FIFO, or null (a FIFO in shared memory).
NetBridge* bridgeOf(const LaneRun& run, const executor::Port* port) {
  NetBridge* b = run.owner->ports->bridge();
  return b != nullptr && port->fifo.protocol == executor::Protocol::Bulk && b->bridges(port->fifo.head) ? b : nullptr;
}

// Every step of the group as the choice sees it, and where it is.
void describeGroup(const LaneGroup& group, std::vector<ZeroCopyStep>* steps, std::vector<Where>* where) {
  std::map<const executor::Port*, int> receivingLanes;
  for (const LaneRun& run : group.runs)
    for (uint32_t p = 0; p < run.exec->nrecvPorts; ++p) ++receivingLanes[run.exec->recvPorts[p]];
  for (const LaneRun& run : group.runs) {
    std::map<int32_t, uint64_t> sent, taken;  // messages so far per port of the lane
    for (uint32_t i = 0; i < run.exec->nsteps; ++i) {
      const executor::ExecStep& e = run.exec->steps[i];
      ZeroCopyStep z = describe(e, run.owner->ops[e.op]);
      z.lane = uint32_t(&run - group.runs.data());
      Where w{&run, i, 0, 0};
      if (e.sendPort >= 0) {
        z.sendBridged = bridgeOf(run, run.exec->sendPorts[e.sendPort]) != nullptr;
        w.sendNth = ++sent[e.sendPort];
      }
      if (e.recvPort >= 0) {
        const executor::Port* port = run.exec->recvPorts[e.recvPort];
        z.recvBridged = receivingLanes[port] == 1 && bridgeOf(run, port) != nullptr;
        w.recvNth = ++taken[e.recvPort];
      }
      steps->push_back(z);
      where->push_back(w);
    }
  }
}

}  // namespace

void ZeroCopy::decide(LaneGroup& group) {
  decided_ = true;
  active_ = false;
  placements_.clear();
  buffers_ = buffersOf(group);
  // A PeerReduce step reaches other ranks' buffers: not described here.
  if (addressesPeers(group)) return;
  std::vector<ZeroCopyStep> steps;
  std::vector<Where> where;
  describeGroup(group, &steps, &where);
  const std::vector<ZeroCopyDecision> decisions = decideZeroCopy(steps);
  std::map<const CommRun*, Counts> counts;
  for (size_t k = 0; k < steps.size(); ++k) {
    const LaneRun& run = *where[k].run;
    // The lanes' steps live in the group's own image, written for this
    // group: the mark is the image's to keep.
    executor::ExecStep& e = const_cast<executor::ExecStep*>(run.exec->steps)[where[k].step];
    const ZeroCopyDecision& d = decisions[k];
    e.flags = uint8_t(e.flags & ~executor::kStepSendsByReference);
    if (d.byReference) e.flags |= executor::kStepSendsByReference;
    if (d.placed || d.after >= 0) {
      const executor::Port* port = run.exec->recvPorts[e.recvPort];
      Placement p{bridgeOf(run, port), port, where[k].recvNth, nullptr, steps[k].bytes, nullptr, 0, nullptr};
      if (d.placed) p.at = const_cast<char*>(steps[k].writes);
      if (d.after >= 0) {
        const Where& ref = where[size_t(d.after)];
        p.reference = const_cast<executor::ExecStep*>(ref.run->exec->steps) + ref.step;
        p.afterPort = ref.run->exec->sendPorts[p.reference->sendPort];
        p.afterNth = ref.sendNth;
      }
      placements_.push_back(p);
    }
    active_ = active_ || d.byReference || d.placed;
    Counts& n = counts[run.owner];
    n.sends += referenceCandidate(steps[k]) != nullptr;
    n.receives += placementCandidate(steps[k]) != nullptr;
    n.byReference += d.byReference;
    n.placed += d.placed;
  }
  for (const auto& [c, n] : counts)
    if (n.sends + n.receives > 0)
      BRAID_INFO(kLogNet,
                 "zero copy: rank %d: %zu of %zu messages to other hosts sent by reference, %zu of %zu received "
                 "in place (the rest copied: their bytes are used meanwhile)",
                 c->comm->rank, n.byReference, n.sends, n.placed, n.receives);
}

void ZeroCopy::prepare(LaneGroup& group) {
  bridges_.clear();
  for (const auto& c : group.comms)
    if (NetBridge* b = c->ports->bridge()) bridges_.push_back(b);
  if (bridges_.empty()) return;
  if (!decided_ || !sameBuffers(group, buffers_)) decide(group);
  if (placements_.empty() && !placing_) return;
  // This run's messages on a port follow the ones it took before; an empty
  // list clears what an earlier decision placed.
  for (NetBridge* b : bridges_) {
    run_.clear();
    for (const Placement& p : placements_)
      if (p.bridge == b)
        run_.push_back({p.port->fifo.head, p.port->seq + p.nth, p.at, p.bytes,
                        p.afterPort ? p.afterPort->fifo.head : nullptr,
                        p.afterPort ? p.afterPort->seq + p.afterNth : 0});
    b->receiveInPlace(run_);
  }
  placing_ = !placements_.empty();
  holdOrCopy();
}

// A message the bridge must hold back may be in its FIFO already (its peer
// ran ahead, and the previous run's pumping delivered it): then nothing holds
// it, and the step that would send the bytes it overwrites by reference
// copies them into its slot this run.
void ZeroCopy::holdOrCopy() {
  for (const Placement& p : placements_)
    if (p.reference != nullptr) p.reference->flags |= executor::kStepSendsByReference;
  for (const Placement& p : placements_)
    if (p.reference != nullptr && p.bridge->delivered(p.port->fifo.head) >= p.port->seq + p.nth)
      p.reference->flags = uint8_t(p.reference->flags & ~executor::kStepSendsByReference);
}

void ZeroCopy::finish(LaneGroup& group, const Result& why) {
  if (why.ok() || !active_) return;
  for (const auto& c : group.comms)
    if (NetBridge* b = c->ports->bridge()) b->abandon(why);
}

}  // namespace braid::lanes
