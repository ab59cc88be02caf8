#include "schedule/memory_traffic.h"

namespace braid::schedule {

namespace {

// Reads and writes of one step, in units of its count.
struct Moves {
  double reads = 0;
  double writes = 0;
};

Moves movesOf(const Step& s, int nranks) {
  switch (s.kind) {
    case StepKind::Send: return {1, 1};                // src -> slot
    case StepKind::Recv: return {1, 1};                // slot -> dst
    case StepKind::RecvReduceSend: return {2, 1};      // slot, src -> slot
    case StepKind::RecvReduceCopy: return {2, 1};      // slot, src -> dst
    case StepKind::RecvReduceCopySend: return {3, 2};  // slot, src -> dst; dst -> slot
    case StepKind::RecvCopySend: return {2, 2};        // slot -> slot; slot -> dst
    case StepKind::Copy: {
      const bool onItself = s.src.buffer == s.dst.buffer && s.src.offset == s.dst.offset;
      if (onItself && !s.srcIsContribution && !s.final) return {0, 0};
      return {1, 1};
    }
    case StepKind::PeerReduce: return {s.peerSrc ? double(nranks) : 1.0, s.peerDst ? double(nranks) : 1.0};
  }
  return {};
}

}  // namespace

MemoryTraffic memoryTraffic(const Plan& plan, size_t elemSize, int nranks) {
  MemoryTraffic t;
  for (const Lane& lane : plan.lanes)
    for (const Step& s : lane.steps) {
      const Moves m = movesOf(s, nranks);
      const double bytes = double(s.count) * double(elemSize);
      t.readBytes += m.reads * bytes;
      t.writtenBytes += m.writes * bytes;
    }
  return t;
}

}  // namespace braid::schedule
