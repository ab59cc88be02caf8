// A float32 (or, under an fp8 wire, bfloat16) step whose messages travel narrowed (OpBuffers::wire; the format
// is src/reduce/wire_format.h): what it receives is widened, accumulated in
// float with the step's functor and narrowed once more where it is sent, so
// every hop adds in float and only the wire is narrow.
//
// Every rank ends with the same bits when each finished value is computed on
// one rank (its owner) and reaches the others as the owner's narrowed
// message: the owner keeps the widened narrowing itself (OpBuffers::roundFinal)
// and a forwarded message is copied byte for byte. Halving-doubling sends a
// finished value again in other pieces, which start on the wire's groups
// (CollShape::align). Recursive doubling computes every value on both
// partners of a round: each keeps the widened narrowing of what it sends
// (Step::keepsWire), so both add the same two operands, and float addition
// is commutative.
//
// Work is split by groups of 32 values (one thread a group), so a thread
// reads the local values of its group before it writes them: in place is safe.
// On the host the loops run built for the CPU's vector unit (host_wire.cc).
#pragma once

#include <type_traits>

#include "kernels/executor/plan_interpreter.h"
#include "reduce/wire_format.h"
#include "reduce/wire_loops.h"
#if !defined(__CUDA_ARCH__)
#include "reduce/fixed_point.h"
#endif
#if defined(__CUDACC__)
#include "reduce/wire_codecs_packed.h"
#endif

namespace braid::executor {

// The op as the wire loops compute it, in float: a bfloat16 PreMulSum's
// scalar, kept in bfloat16, becomes the float it stands for.
template <class Data>
BRAID_HD reduce::RedOp floatComputedOp(const reduce::RedOp& op) {
  reduce::RedOp f = op;
  if constexpr (!std::is_same<Data, float>::value) {
    if (op.kind == reduce::RedKind::PreMulSum) {
      const float scale = reduce::scaleOf<Data>(op).scalar;
      const uint8_t* b = reinterpret_cast<const uint8_t*>(&scale);
      for (size_t i = 0; i < sizeof(float); ++i) f.scalar[i] = b[i];
    }
    f.type = ncclFloat32;
  }
  return f;
}

#if defined(__CUDACC__)
// A block thread's share of a piece (p.firstGroup, p.stride), with the
// loops as a block builds them (reduce::kBlockLoops) and the scaled formats'
// packed codecs (reduce/wire_codecs_packed.h: the GPU's paired conversions
// from sm_89, the same bits as the portable codecs; on older GPUs CUDA's
// headers convert in software). bfloat16 values travel only as fp8
// (engine/task_plan.cc wireTypeFor): no loops for the other codecs.
// tests/gpu's gpu_wire_loops_test holds it to the host's bits.
template <class Data>
__device__ BRAID_INLINE void runWirePieceInBlock(const reduce::WirePiece& p) {
  if constexpr (std::is_same<Data, float>::value) {
    reduce::withWireCodec<reduce::WireF16Packed, reduce::WireE4M3Packed, reduce::WireE5M2Packed>(
        p.wire, [&](auto codec) { reduce::runWirePieceAs<decltype(codec), Data>(p); });
  } else if (p.wire == reduce::WireType::Fp8E5M2) {
    reduce::runWirePieceAs<reduce::WireE5M2Packed, Data>(p);
  } else {
    reduce::runWirePieceAs<reduce::WireE4M3Packed, Data>(p);
  }
}
#endif

// The step's arithmetic (src/reduce/wire_loops.h does it per group of 32
// values): `in` the received message or null, `out` the message to fill or null.
// Data: the values' type, float or reduce::BFloat16.
// A call in a block: runStepWith places its compute at each protocol's
// path, and the wire loops are large.
template <class G, class Data>
BRAID_HD BRAID_INLINE_ON_HOST void computeWireStep(const G& g, const OpBuffers& o, const ExecStep& s, const char* in,
                                                   char* out) {
  reduce::WirePiece p;
  p.wire = reduce::WireType(o.wire);
  p.data = o.op.type;
  p.op = floatComputedOp<Data>(o.op);
  p.pre = (s.flags & kStepContribution) != 0;
  // A Send applies no post-division, as in runStep.
  p.post = (s.flags & kStepFinal) != 0 && s.kind != schedule::StepKind::Send;
  p.round = ((s.flags & kStepFinal) != 0 && o.roundFinal != 0) || (s.flags & kStepKeepsWire) != 0;
  p.count = s.count;
  p.firstGroup = g.tid();
  p.stride = g.size();
  p.in = reinterpret_cast<const uint8_t*>(in);
  p.out = reinterpret_cast<uint8_t*>(out);
  Data* dst = stepWritesDstKind(s.kind) ? bufferAt<Data>(o, s.dstBuffer, s.dstOffset) : nullptr;
  const bool local = s.kind != schedule::StepKind::Recv && s.kind != schedule::StepKind::RecvCopySend;
  const Data* src = local ? bufferAt<Data>(o, s.srcBuffer, s.srcOffset) : nullptr;
  p.dst = dst;
  p.src = src;
  if (s.kind == schedule::StepKind::RecvCopySend) {
    // Forwarded as received: the owner's narrowing, bit for bit.
    copyElems(g, p.out, p.in, wireBytes(p.wire, p.count));
    p.out = nullptr;
  }
  if (s.kind == schedule::StepKind::Copy && !p.round) {
    if (p.pre || p.post || src != dst) applyCopy(g, o.op, dst, src, p.count, p.pre, p.post);
  } else {
#if defined(__CUDA_ARCH__)
    runWirePieceInBlock<Data>(p);
#else
    reduce::runWirePieceOnHost(p);
#endif
  }
  g.sync();
}

#if !defined(__CUDA_ARCH__)
// A step of reproducible mode's exact sums (WireType::Fixed64, host only):
// int64 fixed point in its messages, its float32 contribution converted as
// it is added, the sum back in float32 where the step finishes it. Its
// element's block, hence its shift, is its place in the input, so only steps
// that read their contribution from the input, or only forward, run it (the
// ring's reduce-scatter: tuning/planner.cc plans it on the ring only).
inline bool fixedStepRuns(const OpBuffers& o, const ExecStep& s) {
  using schedule::StepKind;
  if (o.fixedShifts == nullptr || o.op.type != ncclFloat32) return false;
  if (s.kind == StepKind::RecvCopySend) return true;  // forwards the int64 as they came
  // A peer reduce reads its peers' buffers, not a message.
  return schedule::stepReadsSrc(s.kind) && s.kind != StepKind::PeerReduce && s.srcBuffer == schedule::Buffer::Input;
}

template <class G>
void computeFixedStep(const G& g, const OpBuffers& o, const ExecStep& s, const char* in, char* out) {
  if (s.kind == schedule::StepKind::RecvCopySend) {
    copyElems(g, out, in, wireBytes(reduce::WireType::Fixed64, s.count));
    g.sync();
    return;
  }
  reduce::fixed::FixedPiece p;
  p.in = reinterpret_cast<const int64_t*>(in);
  p.out = reinterpret_cast<int64_t*>(out);
  p.src = bufferAt<const float>(o, s.srcBuffer, s.srcOffset);
  p.dst = stepWritesDstKind(s.kind) ? bufferAt<float>(o, s.dstBuffer, s.dstOffset) : nullptr;
  p.count = s.count;
  p.firstElem = s.srcOffset;
  p.shifts = o.fixedShifts;
  p.divisor = o.op.kind == reduce::RedKind::SumPostDiv ? int(o.op.divisor) : 1;
  if (g.tid() == 0) reduce::fixed::runFixedPiece(p);
  g.sync();
}
#endif

// float32 and bfloat16 values share one instantiation of the step's protocol
// code (runStepWith): a block's build pays for each.
template <class G>
BRAID_HD ExecStatus runWireStep(const G& g, LaneExec& L, const ExecStep& s) {
  if (s.op >= L.nops) return ExecStatus::BadStep;
  const reduce::WireType w = reduce::WireType(L.ops[s.op].wire);
  if (w == reduce::WireType::Fixed64) {
    // Reproducible mode's sums run on host buffers (device buffers are staged
    // for them): a block, or its emulation, refuses the step.
#if !defined(__CUDA_ARCH__)
    if constexpr (!G::kDevice) {
      if (fixedStepRuns(L.ops[s.op], s))
        return runStepWith(g, L, s, wireBytes(w, s.count),
                           [&](const char* in, char* out) { computeFixedStep(g, L.ops[s.op], s, in, out); });
    }
#endif
    return ExecStatus::BadStep;
  }
  const OpBuffers& o = L.ops[s.op];
  return runStepWith(g, L, s, wireBytes(w, s.count), [&](const char* in, char* out) {
    if (o.op.type == ncclBfloat16) {
      computeWireStep<G, reduce::BFloat16>(g, o, s, in, out);
    } else {
      computeWireStep<G, float>(g, o, s, in, out);
    }
  });
}

}  // namespace braid::executor
