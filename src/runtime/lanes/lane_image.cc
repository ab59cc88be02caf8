#include "runtime/lanes/lane_image.h"

#include <cstring>

namespace braid {
namespace lanes {

namespace {

// Hands out 8-byte aligned pieces of the block, first counting, then placing.
class Layout {
 public:
  size_t take(size_t bytes) {
    const size_t at = used_;
    used_ += (bytes + 7) & ~size_t(7);
    return at;
  }
  size_t used() const { return used_; }

 private:
  size_t used_ = 0;
};

struct LaneParts {
  size_t steps = 0, sendPorts = 0, recvPorts = 0, recvStage = 0, sendStage = 0;
};

struct ImageLayout {
  size_t lanes = 0, ops = 0, stages = 0, bytes = 0;
  std::vector<LaneParts> parts;
};

ImageLayout layoutOf(const LaneProgram& program, size_t nops, uint64_t llStageBytes) {
  Layout layout;
  ImageLayout l;
  l.lanes = layout.take(program.lanes.size() * sizeof(exec::LaneExec));
  l.ops = layout.take(nops * sizeof(exec::OpBuffers));
  l.stages = layout.take(program.nstages * sizeof(uint64_t));
  for (const ProgramLane& lane : program.lanes) {
    LaneParts p;
    p.steps = layout.take(lane.bound.steps.size() * sizeof(exec::ExecStep));
    p.sendPorts = layout.take(lane.bound.sendPeers.size() * sizeof(exec::Port*));
    p.recvPorts = layout.take(lane.bound.recvPeers.size() * sizeof(exec::Port*));
    if (lane.anyLL) {
      p.recvStage = layout.take(llStageBytes);
      p.sendStage = layout.take(llStageBytes);
    }
    l.parts.push_back(p);
  }
  l.bytes = layout.used();
  return l;
}

}  // namespace

size_t laneImageBytes(const LaneProgram& program, size_t nops, uint64_t llStageBytes) {
  return layoutOf(program, nops, llStageBytes).bytes;
}

Result writeLaneImage(const LaneProgram& program, const std::vector<exec::OpBuffers>& ops, const PortOf& portOf,
                      uint64_t llStageBytes, const uint32_t* abortWord, uintptr_t base, void* dst) {
  if (base % 8 != 0 || reinterpret_cast<uintptr_t>(dst) % 8 != 0 || llStageBytes % 8 != 0)
    return fail(ncclInternalError, "lane image: misaligned block or staging size");
  const ImageLayout l = layoutOf(program, ops.size(), llStageBytes);
  char* host = static_cast<char*>(dst);
  memset(host, 0, l.bytes);  // stage counters start at zero
  auto there = [base](size_t offset) { return base + offset; };
  if (!ops.empty()) memcpy(host + l.ops, ops.data(), ops.size() * sizeof(exec::OpBuffers));
  for (size_t i = 0; i < program.lanes.size(); ++i) {
    const ProgramLane& lane = program.lanes[i];
    const LaneParts& p = l.parts[i];
    if (!lane.bound.steps.empty())
      memcpy(host + p.steps, lane.bound.steps.data(), lane.bound.steps.size() * sizeof(exec::ExecStep));
    auto* sends = reinterpret_cast<exec::Port**>(host + p.sendPorts);
    auto* recvs = reinterpret_cast<exec::Port**>(host + p.recvPorts);
    for (size_t k = 0; k < lane.bound.sendPeers.size(); ++k) sends[k] = portOf(lane.sendKey(k));
    for (size_t k = 0; k < lane.bound.recvPeers.size(); ++k) recvs[k] = portOf(lane.recvKey(k));
    exec::LaneExec L;
    L.steps = reinterpret_cast<const exec::ExecStep*>(there(p.steps));
    L.nsteps = uint32_t(lane.bound.steps.size());
    L.sendPorts = reinterpret_cast<exec::Port* const*>(there(p.sendPorts));
    L.nsendPorts = uint32_t(lane.bound.sendPeers.size());
    L.recvPorts = reinterpret_cast<exec::Port* const*>(there(p.recvPorts));
    L.nrecvPorts = uint32_t(lane.bound.recvPeers.size());
    L.ops = reinterpret_cast<const exec::OpBuffers*>(there(l.ops));
    L.nops = uint32_t(ops.size());
    L.stages = reinterpret_cast<uint64_t*>(there(l.stages));
    L.nstages = program.nstages;
    if (lane.anyLL) {
      L.recvStage = reinterpret_cast<uint32_t*>(there(p.recvStage));
      L.sendStage = reinterpret_cast<uint32_t*>(there(p.sendStage));
      L.stageBytes = llStageBytes;
    }
    L.wait.abortFlag = abortWord;
    memcpy(host + l.lanes + i * sizeof(exec::LaneExec), &L, sizeof(L));
  }
  return Result::success();
}

}  // namespace lanes
}  // namespace braid
