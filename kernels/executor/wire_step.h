// A float32 step whose messages travel narrowed (OpBuffers::wire; the format
// is src/reduce/wire_format.h): what it receives is widened, accumulated in
// float with the step's functor and narrowed once more where it is sent, so
// every hop adds in float and only the wire is narrow.
//
// Every rank ends with the same bits when each finished value is computed on
// one rank (its owner) and reaches the others as the owner's narrowed
// message: the owner keeps the widened narrowing itself (OpBuffers::roundFinal)
// and a forwarded message is copied byte for byte. Plans that compute a
// finished value on several ranks (recursive doubling) or send it again in
// other pieces (halving-doubling, direct) are not run with a wire type
// (schedule/generate.h algorithmHasOneOwner).
//
// Work is split by groups of 32 values (one thread a group), so a thread
// reads the local values of its group before it writes them: in place is safe.
// On the host the loops run built for the CPU's vector unit (host_wire.cc).
#pragma once

#include "kernels/executor/plan_interpreter.h"
#include "reduce/wire_format.h"
#include "reduce/wire_loops.h"

namespace braid::executor {

// The step's arithmetic (src/reduce/wire_loops.h does it per group of 32
// values): `in` the received message or null, `out` the message to fill or null.
template <class G>
BRAID_HD void computeWireStep(const G& g, const OpBuffers& o, const ExecStep& s, const char* in, char* out) {
  reduce::WirePiece p;
  p.wire = reduce::WireType(o.wire);
  p.op = o.op;
  p.pre = (s.flags & kStepContribution) != 0;
  // A Send applies no post-division, as in runStep.
  p.post = (s.flags & kStepFinal) != 0 && s.kind != schedule::StepKind::Send;
  p.round = (s.flags & kStepFinal) != 0 && o.roundFinal != 0;
  p.count = s.count;
  p.firstGroup = g.tid();
  p.stride = g.size();
  p.in = reinterpret_cast<const uint8_t*>(in);
  p.out = reinterpret_cast<uint8_t*>(out);
  p.dst = stepWritesDstKind(s.kind) ? bufferAt<float>(o, s.dstBuffer, s.dstOffset) : nullptr;
  const bool local = s.kind != schedule::StepKind::Recv && s.kind != schedule::StepKind::RecvCopySend;
  p.src = local ? bufferAt<float>(o, s.srcBuffer, s.srcOffset) : nullptr;
  if (s.kind == schedule::StepKind::RecvCopySend) {
    // Forwarded as received: the owner's narrowing, bit for bit.
    copyElems(g, p.out, p.in, wireBytes(p.wire, p.count));
    p.out = nullptr;
  }
  if (s.kind == schedule::StepKind::Copy && !p.round) {
    if (p.pre || p.post || p.src != p.dst) applyCopy(g, o.op, p.dst, p.src, p.count, p.pre, p.post);
  } else {
#if defined(__CUDA_ARCH__)
    withWireCodec(p.wire, [&](auto codec) { reduce::runWirePieceAs<decltype(codec)>(p); });
#else
    reduce::runWirePieceOnHost(p);
#endif
  }
  g.sync();
}

template <class G>
BRAID_HD ExecStatus runWireStep(const G& g, LaneExec& L, const ExecStep& s) {
  if (s.op >= L.nops) return ExecStatus::BadStep;
  const reduce::WireType w = reduce::WireType(L.ops[s.op].wire);
  return runStepWith(g, L, s, wireBytes(w, s.count),
                     [&](const char* in, char* out) { computeWireStep(g, L.ops[s.op], s, in, out); });
}

}  // namespace braid::executor
