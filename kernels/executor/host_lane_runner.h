// Host side: runs one lane in the calling thread for whatever datatype its
// RedOp names (all 12 instantiated: host code only, so nvcc's time is not
// spent on them).
#pragma once

#include "kernels/executor/plan_interpreter.h"

namespace braid {
namespace exec {

inline ExecStatus runLaneOnHost(LaneExec& L) {
  const HostGroup g;
  switch (L.op.type) {
    case ncclInt8: return runLane<int8_t>(g, L);
    case ncclUint8: return runLane<uint8_t>(g, L);
    case ncclInt32: return runLane<int32_t>(g, L);
    case ncclUint32: return runLane<uint32_t>(g, L);
    case ncclInt64: return runLane<int64_t>(g, L);
    case ncclUint64: return runLane<uint64_t>(g, L);
    case ncclFloat16: return runLane<Half>(g, L);
    case ncclFloat32: return runLane<float>(g, L);
    case ncclFloat64: return runLane<double>(g, L);
    case ncclBfloat16: return runLane<BFloat16>(g, L);
    case ncclFloat8e4m3: return runLane<Fp8E4M3>(g, L);
    case ncclFloat8e5m2: return runLane<Fp8E5M2>(g, L);
    default: return ExecStatus::BadStep;
  }
}

}  // namespace exec
}  // namespace braid
