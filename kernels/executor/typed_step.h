// One step with the element type of its operation, for lanes that mix
// datatypes: the host runner and the device kernel dispatch alike. fp8 steps
// exist on the host and on sm_90+; below that a device build has no fp8 code
// and such a step is BadStep (launches refuse fp8 there first). Steps with a
// wire type (wire_step.h) run everywhere: their codecs are integer and float
// arithmetic, not fp8 instructions.
#pragma once

#include "kernels/executor/plan_interpreter.h"
#include "kernels/executor/shared_layout.h"
#include "kernels/executor/wire_step.h"

namespace braid::executor {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define BRAID_EXEC_HAS_FP8 1
#else
#define BRAID_EXEC_HAS_FP8 0
#endif

// Narrow messages (a wire type): wire_step.h, on the host and in a block alike.
template <class T, class G>
BRAID_HD ExecStatus runStepOrWireStep(const G& g, LaneExec& L, const ExecStep& s) {
  if (L.ops[s.op].wire != 0) return runWireStep(g, L, s);
  return runStep<T>(g, L, s);
}

template <class G>
BRAID_HD ExecStatus runStepOfItsType(const G& g, LaneExec& L, const ExecStep& s) {
  if (s.op >= L.nops) return ExecStatus::BadStep;
  switch (L.ops[s.op].op.type) {
    case ncclInt8: return runStep<int8_t>(g, L, s);
    case ncclUint8: return runStep<uint8_t>(g, L, s);
    case ncclInt32: return runStep<int32_t>(g, L, s);
    case ncclUint32: return runStep<uint32_t>(g, L, s);
    case ncclInt64: return runStep<int64_t>(g, L, s);
    case ncclUint64: return runStep<uint64_t>(g, L, s);
    case ncclFloat16: return runStep<reduce::Half>(g, L, s);
    case ncclFloat32: return runStepOrWireStep<float>(g, L, s);
    case ncclFloat64: return runStep<double>(g, L, s);
    case ncclBfloat16: return runStepOrWireStep<reduce::BFloat16>(g, L, s);
#if BRAID_EXEC_HAS_FP8
    case ncclFloat8e4m3: return runStep<reduce::Fp8E4M3>(g, L, s);
    case ncclFloat8e5m2: return runStep<reduce::Fp8E5M2>(g, L, s);
#endif
    default: return ExecStatus::BadStep;
  }
}

// A lane whose operations may have different datatypes.
template <class G>
BRAID_HD ExecStatus runMixedLane(const G& g, LaneExec& L) {
  return runLaneWith(g, L, [&](const ExecStep& s) { return runStepOfItsType(g, L, s); });
}

}  // namespace braid::executor
