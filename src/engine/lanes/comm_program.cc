#include "engine/lanes/comm_program.h"

#include <algorithm>

#include "engine/comm.h"
#include "engine/fingerprint.h"
#include "engine/task_plan.h"
#include "tuning/device_channels.h"

namespace braid::lanes {

namespace {

// The most bytes any message of the call can carry: its whole buffer. Every
// rank computes the same value, so all choose the same protocol for it.
uint64_t operationBytes(const engine::Task& t) {
  uint64_t elems = t.count;
  switch (t.coll) {
    case schedule::Collective::AllGather:
    case schedule::Collective::ReduceScatter:
    case schedule::Collective::AllToAll:
    case schedule::Collective::Gather:
    case schedule::Collective::Scatter: elems *= uint64_t(t.comm->nranks); break;
    default: break;
  }
  return elems * reduce::typeSize(t.type);
}

// On host threads an LL line costs a poll of its own and twice the bytes,
// while a bulk slot's counter is one coherent cache line: measured on 2 ranks
// over shm (docs/performance.md, "One engine"), LL is faster only up to 32 B.
constexpr uint64_t kHostLLOpBytes = 32;

// Plan kernels spread a large call over channels (a CUDA block each) unless
// BRAID_NCHANNELS fixed their number (ncclConfig_t::maxCTAs caps them:
// ncclComm::deviceChannelCap, peerAccessChannelCap); host threads keep the
// communicator's (one thread moves every byte anyway).
int channelsOf(const engine::Task& t, LaneRunner runner, bool peerAccess) {
  if (runner == LaneRunner::Host || t.comm->settings.nchannelsFixed) return 0;
  if (peerAccess)
    return tuning::deviceChannelsFor(operationBytes(t), t.comm->peerAccessChannelCap,
                                     tuning::kPeerAccessBytesPerChannel);
  return tuning::deviceChannelsFor(operationBytes(t), t.comm->deviceChannelCap);
}

executor::Protocol protocolOf(const engine::Task& t, const LaneLimits& limits, LaneRunner runner) {
  const uint64_t most = runner == LaneRunner::Host ? std::min(kHostLLOpBytes, limits.llPayloadBytes)
                                                   : limits.llPayloadBytes;
  return laneUsesLL(tuningInputOf(t), operationBytes(t), most) ? executor::Protocol::LL : executor::Protocol::Bulk;
}

}  // namespace

LaneLimits limitsOf(const ncclComm* comm) {
  LaneLimits l;
  l.channelPayloadBytes = comm->settings.slotBytes;
  l.peerPayloadBytes = comm->settings.peerSlotBytes;
  l.llPayloadBytes = std::min<uint64_t>({l.llPayloadBytes, l.channelPayloadBytes, l.peerPayloadBytes});
  return l;
}

Result commProgramOf(const std::vector<const engine::Task*>& tasks, LaneRunner runner, CommProgram* out,
                     bool peerAccess) {
  if (tasks.empty()) return fail(ncclInternalError, "lane program of no call");
  std::vector<schedule::Plan> plans;
  std::vector<LaneOp> ops;
  CommProgram cp;
  const LaneLimits limits = limitsOf(tasks.front()->comm);
  for (const engine::Task* t : tasks) {
    const schedule::CollShape shape = shapeOf(*t, channelsOf(*t, runner, peerAccess), peerAccess);
    plans.push_back(generatePlan(shape));
    ops.push_back({t->type, protocolOf(*t, limits, runner), t->wire});
    cp.shapeFingerprints.push_back(shapeFingerprint(*t, shape, ops.back().protocol));
    cp.scratchOffsets.push_back(cp.scratchBytes);
    cp.scratchBytes += (plans.back().scratchElems * reduce::typeSize(t->type) + 63) & ~size_t(63);
  }
  auto program = std::make_shared<LaneProgram>();
  BRAID_TRY(buildLaneProgram(ops, plans, limits, program.get()));
  cp.program = std::move(program);
  *out = std::move(cp);
  return Result::success();
}

executor::OpBuffers opBuffersOf(const engine::Task& t, char* scratch, uint32_t shapeFingerprint) {
  executor::OpBuffers o{static_cast<const char*>(t.sendbuff), static_cast<char*>(t.recvbuff), scratch, t.op,
                        engine::callFingerprint(shapeFingerprint, t.callNumber)};
  o.wire = uint8_t(t.wire);
  // An allreduce's finished values reach every rank: all keep the owner's narrowing.
  o.roundFinal = t.wire != reduce::WireType::None && t.coll == schedule::Collective::AllReduce;
  o.fixedShifts = t.fixedShifts;
  return o;
}

}  // namespace braid::lanes
