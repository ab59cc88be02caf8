// The portable plan interpreter: runs one lane of a plan (src/schedule/plan.h)
// on raw buffers over FIFOs (fifo_view.h) with the bulk or the LL protocol.
// Header-only and BRAID_HD: the host tests run a lane per thread
// (HostGroup), the kernel of plan_kernel.cu a lane per block (BlockGroup).
//
// A step applies the reduction functors of src/reduce (PreMulSum on
// srcIsContribution, SumPostDiv on final). How a lane waits depends on who
// runs it: a CUDA block polls until its message and its send slot are there
// and runs its lane to the end; a host thread runs many lanes in turns, so
// there a lane is resumable (WaitControl::resumable): a wait that is not ready
// returns WouldBlock and the next call continues exactly where it stopped
// (LaneExec::currentStep and the resume fields below).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/executor/bulk_protocol.h"
#include "kernels/executor/element_ops.h"
#include "kernels/executor/fifo_view.h"
#include "kernels/executor/ll_protocol.h"
#include "schedule/plan.h"

namespace braid::executor {

constexpr uint8_t kStepContribution = 1;  // Step::srcIsContribution
constexpr uint8_t kStepFinal = 2;         // Step::final
constexpr uint8_t kStepPeerSrc = 4;       // Step::peerSrc
constexpr uint8_t kStepPeerDst = 8;       // Step::peerDst
constexpr uint8_t kStepKeepsWire = 16;    // Step::keepsWire
// Host runner only (zero_copy.h): the step's message is posted by reference
// to the user-buffer bytes it holds (a plain Send's source; the destination
// of a RecvReduceCopySend or RecvCopySend), not copied into its slot.
constexpr uint8_t kStepSendsByReference = 32;
constexpr uint32_t kReceivedLL = 1;       // LaneExec::resumePhase

// A Step with its peers resolved to the lane's ports (lane_binding.h).
struct ExecStep {
  schedule::StepKind kind = schedule::StepKind::Copy;
  schedule::Buffer srcBuffer = schedule::Buffer::Input;
  schedule::Buffer dstBuffer = schedule::Buffer::Input;
  uint8_t flags = 0;
  int32_t sendPort = -1;  // index into LaneExec::sendPorts, -1 none
  int32_t recvPort = -1;  // index into LaneExec::recvPorts, -1 none
  uint32_t op = 0;        // index into LaneExec::ops
  // Operations of a group that use channel lanes run one after another (their
  // lanes may share FIFOs): the first step of a lane's part of an operation
  // waits until stages[waitStage] reaches waitCount (the previous such
  // operation's lanes all finished); the last step adds 1 to
  // stages[doneStage]. -1: no wait / no count.
  int32_t waitStage = -1;
  int32_t doneStage = -1;
  uint64_t waitCount = 0;
  uint64_t srcOffset = 0;  // elements
  uint64_t dstOffset = 0;  // elements
  uint64_t count = 0;      // elements
};

// The buffers and arithmetic of one operation. A lane may carry steps of
// several operations of a group (in call order), all of one datatype.
struct OpBuffers {
  const char* input = nullptr;
  char* output = nullptr;
  char* scratch = nullptr;
  reduce::RedOp op;
  // Stamped on every message the operation sends and checked on every one it
  // receives (fifo_view.h): set per call, like the buffers.
  uint32_t fingerprint = 0;
  // A float32 reduction whose messages travel narrowed (src/reduce/wire_format.h,
  // kernels/executor/wire_step.h): a WireType, 0 for none.
  uint8_t wire = 0;
  // With a wire type: the finished values a step writes are the widened
  // narrowing the owner sends, so that every rank holds the same bits
  // (allreduce); 0 keeps them in float (reduce-scatter, reduce).
  uint8_t roundFinal = 0;
  // PeerReduce steps (the PeerAccess algorithm): the same call's OpBuffers of
  // every rank, in rank order, where this lane can read them; null elsewhere.
  const OpBuffers* const* peers = nullptr;
  uint32_t npeers = 0;
  // WireType::Fixed64 (reproducible mode, host only): each input block's
  // fixed-point shift (reduce/fixed_point.h); null otherwise.
  const int32_t* fixedShifts = nullptr;
};

// Everything one lane needs, in memory its threads can reach.
struct LaneExec {
  const ExecStep* steps = nullptr;
  uint32_t nsteps = 0;
  // A FIFO end's Port (with its message count) outlives the lane: lanes of
  // later operations and later runs continue from its `seq`, so lanes hold
  // pointers to ports kept by the runner.
  Port* const* sendPorts = nullptr;
  uint32_t nsendPorts = 0;
  Port* const* recvPorts = nullptr;
  uint32_t nrecvPorts = 0;
  const OpBuffers* ops = nullptr;
  uint32_t nops = 0;
  uint64_t* stages = nullptr;  // shared by a communicator's lanes, zero at the start of a run
  uint32_t nstages = 0;
  // LL steps only: two buffers of stageBytes (>= their ports' payload rounded
  // up to 8).
  uint32_t* recvStage = nullptr;
  uint32_t* sendStage = nullptr;
  uint64_t stageBytes = 0;
  WaitControl wait;
  // Out: the index of the step that failed (nsteps when none did), and on a
  // FingerprintMismatch the fingerprint the message carried.
  uint32_t failedStep = 0;
  uint32_t receivedFingerprint = 0;
  // Out, while it runs: the step the lane is at (for diagnosis), and the
  // message it waits for (waitWord; 0 when none), for a watchdog that must
  // tell whether it waits on a lost peer. One word, so that a reader never
  // pairs a step with another step's message.
  uint64_t currentStep = 0;
  uint64_t waitingOn = 0;
  // Resumable lanes only: what of the step at currentStep is done already.
  // kReceivedLL: its LL message is in recvStage and its slot released;
  // resumeLines: lines of that LL message already taken (its header line,
  // then data lines copied into recvStage).
  uint32_t resumePhase = 0;
  uint64_t resumeLines = 0;
  // Optional, shared by lanes that run together: a lane that fails raises it
  // to its status (the worst wins), for the host to report; with
  // wait.stopFlag pointing at it, the other lanes' waits end on it.
  uint32_t* failure = nullptr;
};

// LaneExec::waitingOn: bit 63 set, bit 62 send (else receive), bits 48-61 the
// port index, bits 0-47 the message number (its low 48 bits).
constexpr uint64_t kWaitMessageMask = (uint64_t(1) << 48) - 1;
BRAID_HD inline uint64_t waitWord(bool send, int32_t port, uint64_t message) {
  return (uint64_t(1) << 63) | (uint64_t(send ? 1 : 0) << 62) | ((uint64_t(port) & 0x3fff) << 48) |
         (message & kWaitMessageMask);
}

// A waitingOn word taken apart.
struct WaitTarget {
  bool waiting = false;  // false: none published (a stage wait, or not started)
  bool send = false;
  uint32_t port = 0;
  uint64_t message = 0;  // its low 48 bits
};

BRAID_HD inline WaitTarget waitTargetOf(uint64_t w) {
  WaitTarget t;
  t.waiting = (w >> 63) != 0;
  t.send = ((w >> 62) & 1) != 0;
  t.port = uint32_t((w >> 48) & 0x3fff);
  t.message = w & kWaitMessageMask;
  return t;
}

// Whether the message a lane published it waits for (waitingOn) is there:
// its send slot is free, or its bulk message (its next LL line) arrived.
// True when it published none (it waits for a stage, or has not started).
// The host runner re-enters a waiting lane only then (a cheap poll), and the
// watchdog judges a lost peer by it.
BRAID_HD inline bool awaitedReady(const LaneExec& L) {
  const WaitTarget t = waitTargetOf(loadRelaxed(&L.waitingOn));
  if (!t.waiting) return true;
  const uint64_t m = t.message;
  // 48-bit differences: counters may start anywhere.
  auto reached = [m](uint64_t counter) { return int64_t(((counter - m) & kWaitMessageMask) << 16) >= 0; };
  if (t.send) {
    if (t.port >= L.nsendPorts) return true;
    const Port& p = *L.sendPorts[t.port];
    return reached(loadAcquire(p.fifo.tail) + p.fifo.nslots);
  }
  if (t.port >= L.nrecvPorts) return true;
  const Port& p = *L.recvPorts[t.port];
  if (p.fifo.protocol != Protocol::LL) return reached(loadAcquire(p.fifo.head));
  const uint64_t* line = reinterpret_cast<const uint64_t*>(p.fifo.slot(m)) + L.resumeLines;
  return llFlag(loadRelaxed(line)) == uint32_t(m);
}

// Where the lane is: the step it is at and the message it waits for (0:
// none), in its own words and, for a watchdog that cannot read those, in its
// beacon (WaitControl::beacon). Thread 0 of the group only.
BRAID_HD inline void publishPlace(LaneExec& L, uint64_t step, uint64_t waiting) {
  storeRelaxed(&L.currentStep, step);
  storeRelaxed(&L.waitingOn, waiting);
  if (L.wait.beacon != nullptr) {
    storeRelaxed(&L.wait.beacon->step, step);
    storeRelaxed(&L.wait.beacon->waitingOn, waiting);
  }
}

BRAID_HD inline void publishWait(LaneExec& L, uint64_t waiting) {
  storeRelaxed(&L.waitingOn, waiting);
  if (L.wait.beacon != nullptr) storeRelaxed(&L.wait.beacon->waitingOn, waiting);
}

// The lane ended with `st` (not WouldBlock): its beacon says so last.
BRAID_HD inline void publishEnd(LaneExec& L, ExecStatus st) {
  LaneBeacon* b = L.wait.beacon;
  if (b == nullptr) return;
  storeRelaxed(&b->step, L.failedStep);
  storeRelaxed(&b->receivedFingerprint, L.receivedFingerprint);
  fenceSystem();
  storeRelease(&b->ended, uint64_t(1 + int32_t(st)));
}

// plan.cc's stepSends/stepReceives, usable on the device.
BRAID_HD inline bool stepSendsKind(schedule::StepKind k) {
  return k == schedule::StepKind::Send || k == schedule::StepKind::RecvReduceSend ||
         k == schedule::StepKind::RecvReduceCopySend || k == schedule::StepKind::RecvCopySend;
}
BRAID_HD inline bool stepReceivesKind(schedule::StepKind k) {
  return k != schedule::StepKind::Send && k != schedule::StepKind::Copy && k != schedule::StepKind::PeerReduce;
}
BRAID_HD inline bool stepWritesDstKind(schedule::StepKind k) {
  return k != schedule::StepKind::Send && k != schedule::StepKind::RecvReduceSend;
}

template <class T>
BRAID_HD T* bufferAt(const OpBuffers& o, schedule::Buffer b, uint64_t offset) {
  char* base = b == schedule::Buffer::Input    ? const_cast<char*>(o.input)
               : b == schedule::Buffer::Output ? o.output
                                               : o.scratch;
  return reinterpret_cast<T*>(base) + offset;
}

// A PeerReduce step: its block of every rank's source (peerSrc; else this
// rank's) reduced in rank order into every rank's destination (peerDst).
template <class T, class G>
BRAID_HD BRAID_OUT_OF_LINE void peerReduceStep(const G& g, const OpBuffers& L, const ExecStep& s) {
  const bool peerSrc = (s.flags & kStepPeerSrc) != 0, peerDst = (s.flags & kStepPeerDst) != 0;
  auto srcAt = [&](uint32_t k) { return bufferAt<T>(peerSrc ? *L.peers[k] : L, s.srcBuffer, s.srcOffset); };
  auto dstAt = [&](uint32_t k) { return bufferAt<T>(peerDst ? *L.peers[k] : L, s.dstBuffer, s.dstOffset); };
  applyReduceAcross<T>(g, L.op, dstAt, peerDst ? L.npeers : 1, srcAt, peerSrc ? L.npeers : 1, s.count,
                       (s.flags & kStepContribution) != 0, (s.flags & kStepFinal) != 0);
}

// A host step's messages that are not in their slots (by reference, host
// only; fifo_view.h).
struct InPlace {
  // The step posts its message as a pointer to these bytes (null: written
  // into its slot).
  const char* sendFrom = nullptr;
  // Where a message received in place may be (its destination, for a Recv
  // or RecvCopySend): one received by reference anywhere else is an error.
  const char* receiveAt = nullptr;
};

// Step `s`'s InPlace: it sends by reference (kStepSendsByReference) a Send's
// source where it goes as it is, or the destination a RecvReduceCopySend or
// RecvCopySend writes and then sends; a Recv or RecvCopySend may find its
// message in its destination already (received there by the bridge).
template <class T>
BRAID_HD InPlace inPlaceOf(const OpBuffers& o, const ExecStep& s) {
  InPlace p;
  if (!kByReference) return p;
  const bool byReference = (s.flags & kStepSendsByReference) != 0;
  auto dst = [&] { return reinterpret_cast<const char*>(bufferAt<T>(o, s.dstBuffer, s.dstOffset)); };
  switch (s.kind) {
    case schedule::StepKind::Send:
      if (byReference && reduce::copiesAsIs(o.op, (s.flags & kStepContribution) != 0, false))
        p.sendFrom = reinterpret_cast<const char*>(bufferAt<T>(o, s.srcBuffer, s.srcOffset));
      break;
    case schedule::StepKind::RecvReduceCopySend:
      if (byReference) p.sendFrom = dst();
      break;
    case schedule::StepKind::RecvCopySend:
      p.receiveAt = dst();
      if (byReference) p.sendFrom = p.receiveAt;
      break;
    case schedule::StepKind::Recv: p.receiveAt = dst(); break;
    default: break;
  }
  return p;
}

// The step's arithmetic: `in` is the received message (null when
// it receives nothing), `out` where its message goes (null when it sends
// nothing, or sends by reference what the step leaves in its destination).
template <class T, class G>
BRAID_HD void computeStep(const G& g, const OpBuffers& L, const ExecStep& s, const T* in, T* out) {
  const bool pre = (s.flags & kStepContribution) != 0;
  const bool fin = (s.flags & kStepFinal) != 0;
  const uint64_t n = s.count;
  switch (s.kind) {
    case schedule::StepKind::Send:
      if (out != nullptr) applyCopy(g, L.op, out, bufferAt<T>(L, s.srcBuffer, s.srcOffset), n, pre, false);
      break;
    case schedule::StepKind::Recv: copyElems(g, bufferAt<T>(L, s.dstBuffer, s.dstOffset), in, n); break;
    case schedule::StepKind::RecvReduceSend:
      applyReduce(g, L.op, out, in, bufferAt<T>(L, s.srcBuffer, s.srcOffset), n, pre, fin);
      break;
    case schedule::StepKind::RecvReduceCopy:
      applyReduce(g, L.op, bufferAt<T>(L, s.dstBuffer, s.dstOffset), in,
                  bufferAt<T>(L, s.srcBuffer, s.srcOffset), n, pre, fin);
      break;
    case schedule::StepKind::RecvReduceCopySend: {
      T* dst = bufferAt<T>(L, s.dstBuffer, s.dstOffset);
      applyReduce(g, L.op, dst, in, bufferAt<T>(L, s.srcBuffer, s.srcOffset), n, pre, fin);
      g.sync();  // dst's elements may belong to other threads in the copy below
      if (out != nullptr) copyElems(g, out, const_cast<const T*>(dst), n);
      break;
    }
    case schedule::StepKind::RecvCopySend:
      if (out != nullptr) copyElems(g, out, in, n);
      // A message the bridge received in place is there already (in == dst).
      copyElems(g, bufferAt<T>(L, s.dstBuffer, s.dstOffset), in, n);
      break;
    case schedule::StepKind::Copy: {
      const T* src = bufferAt<T>(L, s.srcBuffer, s.srcOffset);
      T* dst = bufferAt<T>(L, s.dstBuffer, s.dstOffset);
      if (pre || fin || src != dst) applyCopy(g, L.op, dst, src, n, pre, fin);
      break;
    }
    case schedule::StepKind::PeerReduce: peerReduceStep<T>(g, L, s); break;
  }
  g.sync();
}

// Whether a PeerReduce step has the peers it addresses (others: true).
BRAID_HD inline bool peersBound(const OpBuffers& o, const ExecStep& s) {
  if (s.kind != schedule::StepKind::PeerReduce || (s.flags & (kStepPeerSrc | kStepPeerDst)) == 0) return true;
  if (o.peers == nullptr || o.npeers == 0) return false;
  for (uint32_t k = 0; k < o.npeers; ++k)
    if (o.peers[k] == nullptr) return false;
  return true;
}

// Waits for the operation before this step's to end on every lane.
template <class G>
BRAID_HD ExecStatus waitStage(const G& g, const LaneExec& L, const ExecStep& s) {
  if (s.waitStage < 0) return ExecStatus::Ok;
  if (uint32_t(s.waitStage) >= L.nstages) return ExecStatus::BadStep;
  const uint64_t* counter = L.stages + s.waitStage;
  const ExecStatus st = waitUntil(L.wait, [&] { return loadAcquire(counter) >= s.waitCount; });
  return ExecStatus(g.agree(int32_t(st)));
}

template <class G>
BRAID_HD ExecStatus markStageDone(const G& g, const LaneExec& L, const ExecStep& s) {
  if (s.doneStage < 0) return ExecStatus::Ok;
  if (uint32_t(s.doneStage) >= L.nstages) return ExecStatus::BadStep;
  fenceSystem();
  g.sync();
  if (g.tid() == 0) addRelease(L.stages + s.doneStage, 1);
  g.sync();
  return ExecStatus::Ok;
}

// Each FIFO has one protocol (FifoView::protocol): a step may receive with
// one and send with the other, e.g. from a peer on this host (LL) to one a
// network proxy serves (always bulk). `bytes` is the size of the step's
// messages; compute(in, out) does its arithmetic, `in` the received message
// (null when it receives nothing), `out` where its message goes (null when it
// sends nothing). `inPlace` (host only, inPlaceOf): with sendFrom, the
// step's message goes to a bulk FIFO as a pointer to those bytes, and compute
// gets no `out`; a message received by reference must be at receiveAt.
template <class G, class Compute>
BRAID_HD ExecStatus runStepWith(const G& g, LaneExec& L, const ExecStep& s, uint64_t bytes, const InPlace& inPlace,
                                Compute compute) {
  const bool recvs = stepReceivesKind(s.kind);
  const bool sends = stepSendsKind(s.kind);
  if ((recvs && (s.recvPort < 0 || uint32_t(s.recvPort) >= L.nrecvPorts)) ||
      (sends && (s.sendPort < 0 || uint32_t(s.sendPort) >= L.nsendPorts)))
    return ExecStatus::BadStep;
  Port* rp = recvs ? L.recvPorts[s.recvPort] : nullptr;
  Port* sp = sends ? L.sendPorts[s.sendPort] : nullptr;
  const bool llIn = rp && rp->fifo.protocol == Protocol::LL;
  const bool llOut = sp && sp->fifo.protocol == Protocol::LL;
  if (s.op >= L.nops || !peersBound(L.ops[s.op], s)) return ExecStatus::BadStep;
  if ((rp && bytes > rp->fifo.payloadBytes) || (sp && bytes > sp->fifo.payloadBytes) ||
      ((llIn || llOut) && bytes > L.stageBytes))
    return ExecStatus::BadStep;

  const uint32_t fingerprint = L.ops[s.op].fingerprint;
  const char* in = nullptr;
  // A resumable lane that got its LL message before it had to wait for its
  // send slot does not receive it again.
  if (rp && L.wait.resumable && (L.resumePhase & kReceivedLL) != 0) {
    in = reinterpret_cast<const char*>(L.recvStage);
  } else if (rp) {
    if (g.tid() == 0) publishWait(L, waitWord(false, s.recvPort, rp->seq + 1));
    ExecStatus st;
    if (llIn) {
      // also releases the slot
      st = llRecv(*rp, bytes, fingerprint, L.recvStage, g, L.wait, L.wait.resumable ? &L.resumeLines : nullptr,
                  &L.receivedFingerprint);
      if (st == ExecStatus::Ok && L.wait.resumable) L.resumePhase |= kReceivedLL;
      in = reinterpret_cast<const char*>(L.recvStage);
    } else {
      const char* data = nullptr;
      uint64_t word = 0;
      st = bulkWaitRecv(*rp, bytes, fingerprint, &data, g, L.wait, &word);
      if (st == ExecStatus::FingerprintMismatch && g.tid() == 0) L.receivedFingerprint = messageFingerprint(word);
      // Only a destination is ever received into in place.
      if (kByReference && st == ExecStatus::Ok && messageByReference(word) && data != inPlace.receiveAt)
        st = ExecStatus::BadStep;
      in = data;
    }
    if (st != ExecStatus::Ok) return st;
  }
  char* out = nullptr;
  const bool referenced = kByReference && inPlace.sendFrom != nullptr && sp && !llOut;
  if (sp) {
    if (g.tid() == 0) publishWait(L, waitWord(true, s.sendPort, sp->seq + 1));
    const ExecStatus st = waitCredit(*sp, g, L.wait);
    if (st != ExecStatus::Ok) return st;
    if (!referenced) out = llOut ? reinterpret_cast<char*>(L.sendStage) : bulkSlot(*sp);
  }
  compute(in, out);
  if (sp) {
    if (llOut) {
      llSend(*sp, bytes, fingerprint, L.sendStage, g);
    } else if (referenced) {
      bulkPostReference(*sp, bytes, fingerprint, inPlace.sendFrom, g);
    } else {
      bulkPost(*sp, bytes, fingerprint, g);
    }
  }
  if (rp && !llIn) bulkRelease(*rp, g);
  return ExecStatus::Ok;
}

template <class G, class Compute>
BRAID_HD ExecStatus runStepWith(const G& g, LaneExec& L, const ExecStep& s, uint64_t bytes, Compute compute) {
  return runStepWith(g, L, s, bytes, InPlace(), compute);
}

// A step whose messages hold its elements as they are.
template <class T, class G>
BRAID_HD ExecStatus runStep(const G& g, LaneExec& L, const ExecStep& s) {
  const InPlace inPlace = kByReference && s.op < L.nops ? inPlaceOf<T>(L.ops[s.op], s) : InPlace();
  return runStepWith(g, L, s, s.count * sizeof(T), inPlace, [&](const char* in, char* out) {
    computeStep<T>(g, L.ops[s.op], s, reinterpret_cast<const T*>(in), reinterpret_cast<T*>(out));
  });
}

// Runs the lane's steps in order, each through runOne(step). Every thread of
// the group returns the same status; on failure L.failedStep names the step.
// A resumable lane starts at L.currentStep and returns WouldBlock with its
// place kept; a block always starts at step 0 (its image is fresh).
template <class G, class RunOne>
BRAID_HD ExecStatus runLaneWith(const G& g, LaneExec& L, RunOne runOne) {
  const uint32_t first = L.wait.resumable ? uint32_t(L.currentStep) : 0;
  for (uint32_t i = first; i < L.nsteps; ++i) {
    if (g.tid() == 0) publishPlace(L, i, 0);
    ExecStatus st = waitStage(g, L, L.steps[i]);
    if (st == ExecStatus::Ok) st = runOne(L.steps[i]);
    if (st == ExecStatus::Ok) st = markStageDone(g, L, L.steps[i]);
    if (st == ExecStatus::WouldBlock) return st;
    if (st != ExecStatus::Ok) {
      if (g.tid() == 0) {
        L.failedStep = i;
        // Aborted is the echo of a failure (or of the abort word), not one.
        if (L.failure != nullptr && st != ExecStatus::Aborted) raiseFlag(L.failure, uint32_t(st));
        publishEnd(L, st);
      }
      return st;
    }
    if (L.wait.resumable) {
      L.resumePhase = 0;
      L.resumeLines = 0;
    }
  }
  if (g.tid() == 0) {
    L.failedStep = L.nsteps;
    publishPlace(L, L.nsteps, 0);
    publishEnd(L, ExecStatus::Ok);
  }
  return ExecStatus::Ok;
}

// Sets a resumable lane back to its first step, to run its program again
// (its stage counters are the runner's to zero).
BRAID_HD inline void rewindLane(LaneExec& L) {
  L.currentStep = 0;
  L.waitingOn = 0;
  L.failedStep = 0;
  L.resumePhase = 0;
  L.resumeLines = 0;
  L.receivedFingerprint = 0;
}

}  // namespace braid::executor
