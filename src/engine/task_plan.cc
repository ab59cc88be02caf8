#include "engine/task_plan.h"

#include "engine/comm.h"

namespace braid {

WireType wireTypeFor(const Task& t) {
  const ncclComm* comm = t.comm;
  if (comm->settings.wireType == WireType::None || comm->nranks < 2 || t.type != ncclFloat32) return WireType::None;
  if (t.coll != Collective::AllReduce && t.coll != Collective::ReduceScatter && t.coll != Collective::Reduce)
    return WireType::None;
  const RedKind k = t.op.kind;
  if (k != RedKind::Sum && k != RedKind::PreMulSum && k != RedKind::SumPostDiv) return WireType::None;
  return comm->settings.wireType;
}

TuningInput tuningInputOf(const Task& t) {
  ncclComm* comm = t.comm;
  TuningInput in;
  in.coll = t.coll;
  in.nranks = comm->nranks;
  in.count = t.count;
  in.datatype = t.type;
  in.transport = comm->transportClass;
  // The direct family runs over the per-peer FIFOs (kPeerChannel).
  in.slotBytes = algorithmSupports(Algorithm::Direct, t.coll) ? comm->settings.peerSlotBytes
                                                               : comm->settings.slotBytes;
  in.nchannels = comm->settings.nchannels;
  in.filter = &comm->algoFilter;
  in.calibration = &comm->calibration;
  in.wire = t.wire;
  return in;
}

CollShape shapeOf(const Task& t) {
  ncclComm* comm = t.comm;
  CollShape s;
  s.coll = t.coll;
  s.rank = comm->rank;
  s.nranks = comm->nranks;
  s.count = t.count;
  s.root = t.root;
  const PlanChoice choice = choosePlan(tuningInputOf(t));
  s.algorithm = choice.algorithm;
  s.chunkElems = choice.chunkElems;
  s.nchannels = choice.nchannels;
  s.order = &comm->ringOrder;
  return s;
}

}  // namespace braid
