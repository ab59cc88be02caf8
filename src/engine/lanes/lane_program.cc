#include "engine/lanes/lane_program.h"

#include <map>
#include <tuple>
#include <utility>

#include "base/result.h"
#include "reduce/host_reduce.h"

namespace braid::lanes {

uint64_t payloadBytesOf(const LaneLimits& limits, int32_t channel, executor::Protocol protocol) {
  if (protocol == executor::Protocol::LL) return limits.llPayloadBytes;
  return channel == schedule::kPeerChannel ? limits.peerPayloadBytes : limits.channelPayloadBytes;
}

bool PortKey::operator<(const PortKey& o) const {
  return std::make_tuple(peer, channel, send, protocol) < std::make_tuple(o.peer, o.channel, o.send, o.protocol);
}

PortKey ProgramLane::sendKey(size_t port) const {
  return PortKey{bound.sendPeers[port], bound.channel, true, bound.sendProtocols[port]};
}

PortKey ProgramLane::recvKey(size_t port) const {
  return PortKey{bound.recvPeers[port], bound.channel, false, bound.recvProtocols[port]};
}


namespace {

struct LanePart {
  uint32_t op;
  const schedule::Lane* lane;
};

// Stage of each operation with channel lanes (-1 for the others), and how
// many non-empty channel lanes each operation has.
struct Stages {
  std::vector<int32_t> stageOf;
  std::vector<uint64_t> lanesOfStage;
};

Stages stagesOf(const std::vector<schedule::Plan>& plans) {
  Stages s;
  for (const schedule::Plan& plan : plans) {
    uint64_t n = 0;
    for (const schedule::Lane& lane : plan.lanes)
      if (lane.key.kind == schedule::LaneKind::Channel && !lane.steps.empty()) ++n;
    s.stageOf.push_back(n ? int32_t(s.lanesOfStage.size()) : -1);
    if (n) s.lanesOfStage.push_back(n);
  }
  return s;
}

Result bindParts(const std::vector<LaneOp>& ops, const std::vector<LanePart>& parts, const Stages& stages,
                 const LaneLimits& limits, ProgramLane* out) {
  ProgramLane pl;
  pl.type = ops[parts.front().op].type;
  pl.bound.channel = parts.front().lane->channel;
  size_t nsteps = 0;
  for (const LanePart& p : parts) nsteps += p.lane->steps.size();
  pl.bound.steps.reserve(nsteps);
  for (const LanePart& p : parts) {
    const size_t first = pl.bound.steps.size();
    const executor::Protocol protocol = ops[p.op].protocol;
    pl.anyLL = pl.anyLL || protocol == executor::Protocol::LL;
    const std::string why =
        executor::appendLane(*p.lane, p.op, protocol, reduce::typeSize(ops[p.op].type),
                             payloadBytesOf(limits, pl.bound.channel, protocol), &pl.bound, ops[p.op].wire);
    if (!why.empty()) return fail(ncclInternalError, "lane program: %s", why.c_str());
    const int32_t stage = stages.stageOf[p.op];
    if (p.lane->key.kind != schedule::LaneKind::Channel || stage < 0) continue;
    if (stage > 0) {
      pl.bound.steps[first].waitStage = stage - 1;
      pl.bound.steps[first].waitCount = stages.lanesOfStage[size_t(stage - 1)];
    }
    pl.bound.steps.back().doneStage = stage;
  }
  *out = std::move(pl);
  return Result::success();
}

}  // namespace

Result buildLaneProgram(const std::vector<LaneOp>& ops, const std::vector<schedule::Plan>& plans,
                        const LaneLimits& limits, LaneProgram* out) {
  if (ops.size() != plans.size()) return fail(ncclInternalError, "lane program: %zu operations, %zu plans",
                                              ops.size(), plans.size());
  // Lanes with one key and channel are concatenated; a key may name another
  // channel in another operation (a tree's second lane, a ring's second
  // channel), and then they stay apart.
  std::map<std::pair<schedule::LaneKey, int32_t>, std::vector<LanePart>> byKey;
  for (uint32_t i = 0; i < plans.size(); ++i)
    for (const schedule::Lane& lane : plans[i].lanes)
      if (!lane.steps.empty()) byKey[{lane.key, lane.channel}].push_back({i, &lane});
  const Stages stages = stagesOf(plans);
  LaneProgram program;
  program.nstages = uint32_t(stages.lanesOfStage.size());
  for (const auto& [key, parts] : byKey) {
    program.lanes.emplace_back();
    BRAID_TRY(bindParts(ops, parts, stages, limits, &program.lanes.back()));
  }
  size_t nports = 0;
  for (const ProgramLane& lane : program.lanes) nports += lane.bound.sendPeers.size() + lane.bound.recvPeers.size();
  program.ports.reserve(nports);
  for (const ProgramLane& lane : program.lanes) {
    for (size_t i = 0; i < lane.bound.sendPeers.size(); ++i) program.ports.push_back(lane.sendKey(i));
    for (size_t i = 0; i < lane.bound.recvPeers.size(); ++i) program.ports.push_back(lane.recvKey(i));
  }
  *out = std::move(program);
  return Result::success();
}

}  // namespace braid::lanes
