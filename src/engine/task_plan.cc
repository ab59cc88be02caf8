#include "engine/task_plan.h"

#include "engine/comm.h"
#include "reduce/wire_format.h"

namespace braid::engine {

reduce::WireType wireTypeFor(const Task& t) {
  const ncclComm* comm = t.comm;
  if (t.fixedShifts != nullptr) return reduce::WireType::Fixed64;
  const reduce::WireType wire = comm->settings.wireType;
  if (wire == reduce::WireType::None || comm->nranks < 2) return reduce::WireType::None;
  // float32 under every wire type; bfloat16 only under the fp8 ones, which are narrower.
  const bool fp8 = wire == reduce::WireType::Fp8E4M3 || wire == reduce::WireType::Fp8E5M2;
  if (t.type != ncclFloat32 && !(t.type == ncclBfloat16 && fp8)) return reduce::WireType::None;
  if (t.coll != schedule::Collective::AllReduce && t.coll != schedule::Collective::ReduceScatter &&
      t.coll != schedule::Collective::Reduce)
    return reduce::WireType::None;
  const reduce::RedKind k = t.op.kind;
  if (k != reduce::RedKind::Sum && k != reduce::RedKind::PreMulSum && k != reduce::RedKind::SumPostDiv)
    return reduce::WireType::None;
  return wire;
}

tuning::TuningInput tuningInputOf(const Task& t) {
  ncclComm* comm = t.comm;
  tuning::TuningInput in;
  in.coll = t.coll;
  in.nranks = comm->nranks;
  in.count = t.count;
  in.datatype = t.type;
  in.transport = comm->transportClass;
  // The direct family runs over the per-peer FIFOs (kPeerChannel).
  in.slotBytes =
      algorithmSupports(schedule::Algorithm::Direct, t.coll) ? comm->settings.peerSlotBytes : comm->settings.slotBytes;
  in.nchannels = comm->settings.nchannels;
  in.filter = &comm->algoFilter;
  in.calibration = &comm->calibration;
  in.wire = t.wire;
  return in;
}

schedule::CollShape shapeOf(const Task& t, int nchannels, bool peerAccess) {
  ncclComm* comm = t.comm;
  schedule::CollShape s;
  s.coll = t.coll;
  s.rank = comm->rank;
  s.nranks = comm->nranks;
  s.count = t.count;
  s.root = t.root;
  tuning::TuningInput in = tuningInputOf(t);
  if (nchannels > 0) in.nchannels = nchannels;
  in.peerAccess = peerAccess;
  const tuning::PlanChoice choice = choosePlan(in);
  s.algorithm = choice.algorithm;
  s.chunkElems = choice.chunkElems;
  s.nchannels = choice.nchannels;
  // A narrowed wire's pieces start at its groups; fixed point has none.
  if (t.wire != reduce::WireType::None && t.wire != reduce::WireType::Fixed64) {
    s.align = reduce::kWireGroup;
    s.narrowWire = true;
  }
  s.order = &comm->ringOrder;
  return s;
}

}  // namespace braid::engine
