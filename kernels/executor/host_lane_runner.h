// Host side: runs one lane in the calling thread, each step with the element
// type of its operation (all 12 instantiated: host code only, so nvcc's time
// is not spent on them). A lane may mix operations of several datatypes.
#pragma once

#include "kernels/executor/plan_interpreter.h"

namespace braid {
namespace exec {

template <class G>
ExecStatus runStepOfItsType(const G& g, LaneExec& L, const ExecStep& s) {
  if (s.op >= L.nops) return ExecStatus::BadStep;
  switch (L.ops[s.op].op.type) {
    case ncclInt8: return runStep<int8_t>(g, L, s);
    case ncclUint8: return runStep<uint8_t>(g, L, s);
    case ncclInt32: return runStep<int32_t>(g, L, s);
    case ncclUint32: return runStep<uint32_t>(g, L, s);
    case ncclInt64: return runStep<int64_t>(g, L, s);
    case ncclUint64: return runStep<uint64_t>(g, L, s);
    case ncclFloat16: return runStep<Half>(g, L, s);
    case ncclFloat32: return runStep<float>(g, L, s);
    case ncclFloat64: return runStep<double>(g, L, s);
    case ncclBfloat16: return runStep<BFloat16>(g, L, s);
    case ncclFloat8e4m3: return runStep<Fp8E4M3>(g, L, s);
    case ncclFloat8e5m2: return runStep<Fp8E5M2>(g, L, s);
    default: return ExecStatus::BadStep;
  }
}

inline ExecStatus runLaneOnHost(LaneExec& L) {
  const HostGroup g;
  return runLaneWith(g, L, [&](const ExecStep& s) { return runStepOfItsType(g, L, s); });
}

}  // namespace exec
}  // namespace braid
