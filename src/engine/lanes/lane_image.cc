#include "engine/lanes/lane_image.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "kernels/executor/shared_layout.h"

namespace braid::lanes {

namespace {

// Hands out 8-byte aligned pieces of the block.
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
  uint64_t stageBytes = 0;  // of each LL staging buffer
};

// Each staging buffer holds the lane's largest LL message (which the lane
// program keeps within the LL payload): the image of a host group whose LL
// calls are of 32 B stays some hundred bytes, where buffers of the whole
// payload (64 KiB) made a new call shape cost an mmap of 132 KiB, its page
// faults and its zeroing (90 us on 2 ranks, 190 us on 4, docs/performance.md).
uint64_t laneStageBytes(const ProgramLane& lane) {
  return (std::max<uint64_t>(lane.bound.maxLLMessageBytes, 8) + 7) / 8 * 8;
}

struct PartLayout {
  size_t ops = 0, stages = 0;
  std::vector<size_t> peerTables;  // per entry of ImagePart::peerOps
  std::vector<LaneParts> lanes;
};

struct BlockLayout {
  size_t written = 0;  // what writeLaneImage writes: everything but the LL staging
  size_t bytes = 0;
  std::vector<PartLayout> parts;
};

size_t lanesOf(const std::vector<ImagePart>& parts) {
  size_t n = 0;
  for (const ImagePart& p : parts) n += p.program->lanes.size();
  return n;
}

BlockLayout layoutOf(const std::vector<ImagePart>& parts) {
  Layout layout;
  BlockLayout l;
  layout.take(lanesOf(parts) * sizeof(executor::LaneExec));
  for (const ImagePart& part : parts) {
    PartLayout pl;
    pl.ops = layout.take(part.ops.size() * sizeof(executor::OpBuffers));
    pl.stages = layout.take(part.program->nstages * sizeof(uint64_t));
    for (const std::vector<uintptr_t>& peers : part.peerOps) pl.peerTables.push_back(layout.take(peers.size() * 8));
    for (const ProgramLane& lane : part.program->lanes) {
      LaneParts p;
      p.steps = layout.take(lane.bound.steps.size() * sizeof(executor::ExecStep));
      p.sendPorts = layout.take(lane.bound.sendPeers.size() * sizeof(executor::Port*));
      p.recvPorts = layout.take(lane.bound.recvPeers.size() * sizeof(executor::Port*));
      pl.lanes.push_back(p);
    }
    l.parts.push_back(std::move(pl));
  }
  // The LL staging last: scratch that a lane writes before it reads, so a
  // copied image (a plan kernel's, uploaded at every launch) leaves it out.
  l.written = layout.used();
  for (size_t p = 0; p < parts.size(); ++p)
    for (size_t i = 0; i < parts[p].program->lanes.size(); ++i)
      if (const ProgramLane& lane = parts[p].program->lanes[i]; lane.anyLL) {
        LaneParts& lp = l.parts[p].lanes[i];
        lp.stageBytes = laneStageBytes(lane);
        lp.recvStage = layout.take(lp.stageBytes);
        lp.sendStage = layout.take(lp.stageBytes);
      }
  l.bytes = layout.used();
  return l;
}

// Writes one lane's steps and port pointers into `host`; returns its LaneExec.
executor::LaneExec writeLane(const ImagePart& part, const PartLayout& pl, size_t i, uintptr_t base, char* host) {
  const ProgramLane& lane = part.program->lanes[i];
  const LaneParts& p = pl.lanes[i];
  auto there = [base](size_t offset) { return base + offset; };
  if (!lane.bound.steps.empty())
    memcpy(host + p.steps, lane.bound.steps.data(), lane.bound.steps.size() * sizeof(executor::ExecStep));
  auto* sends = reinterpret_cast<executor::Port**>(host + p.sendPorts);
  auto* recvs = reinterpret_cast<executor::Port**>(host + p.recvPorts);
  for (size_t k = 0; k < lane.bound.sendPeers.size(); ++k) sends[k] = part.portOf(lane.sendKey(k));
  for (size_t k = 0; k < lane.bound.recvPeers.size(); ++k) recvs[k] = part.portOf(lane.recvKey(k));
  executor::LaneExec L;
  L.steps = reinterpret_cast<const executor::ExecStep*>(there(p.steps));
  L.nsteps = uint32_t(lane.bound.steps.size());
  L.sendPorts = reinterpret_cast<executor::Port* const*>(there(p.sendPorts));
  L.nsendPorts = uint32_t(lane.bound.sendPeers.size());
  L.recvPorts = reinterpret_cast<executor::Port* const*>(there(p.recvPorts));
  L.nrecvPorts = uint32_t(lane.bound.recvPeers.size());
  L.ops = reinterpret_cast<const executor::OpBuffers*>(there(pl.ops));
  L.nops = uint32_t(part.ops.size());
  L.stages = reinterpret_cast<uint64_t*>(there(pl.stages));
  L.nstages = part.program->nstages;
  if (lane.anyLL) {
    L.recvStage = reinterpret_cast<uint32_t*>(there(p.recvStage));
    L.sendStage = reinterpret_cast<uint32_t*>(there(p.sendStage));
    L.stageBytes = p.stageBytes;
  }
  L.wait.abortFlag = part.abortWord;
  L.wait.resumable = part.resumable;
  L.failure = part.failureWord;
  // A lane that fails raises it, and the others stop waiting on it.
  L.wait.stopFlag = part.failureWord;
  L.wait.beacon = part.beacons ? part.beacons + i : nullptr;
  return L;
}

// Each operation's table of its peers' OpBuffers, and the operation's
// pointer to it.
void writePeerTables(const ImagePart& part, const PartLayout& pl, uintptr_t base, char* host) {
  for (size_t i = 0; i < part.peerOps.size() && i < part.ops.size(); ++i) {
    const std::vector<uintptr_t>& peers = part.peerOps[i];
    if (peers.empty()) continue;
    memcpy(host + pl.peerTables[i], peers.data(), peers.size() * sizeof(uintptr_t));
    executor::OpBuffers o;
    memcpy(&o, host + pl.ops + i * sizeof o, sizeof o);
    o.peers = reinterpret_cast<const executor::OpBuffers* const*>(base + pl.peerTables[i]);
    o.npeers = uint32_t(peers.size());
    memcpy(host + pl.ops + i * sizeof o, &o, sizeof o);
  }
}

}  // namespace

size_t LaneImageLayout::opBuffersAt(size_t part, size_t op) const {
  return opsAt[part] + op * sizeof(executor::OpBuffers);
}

LaneImageLayout laneImageLayout(const std::vector<ImagePart>& parts) {
  const BlockLayout l = layoutOf(parts);
  LaneImageLayout out;
  out.bytes = l.bytes;
  out.written = l.written;
  for (const PartLayout& pl : l.parts) out.opsAt.push_back(pl.ops);
  return out;
}

Result writeLaneImage(const std::vector<ImagePart>& parts, uintptr_t base, void* dst) {
  if (base % 8 != 0 || reinterpret_cast<uintptr_t>(dst) % 8 != 0)
    return fail(ncclInternalError, "lane image: misaligned block");
  for (const ImagePart& part : parts)
    for (const PortKey& k : portsOf(*part.program))
      if (part.portOf(k) == nullptr)
        return fail(ncclInternalError, "lane image: no port for the FIFO %s rank %d, channel %d",
                    k.send ? "to" : "from", k.peer, k.channel);
  const BlockLayout l = layoutOf(parts);
  char* host = static_cast<char*>(dst);
  memset(host, 0, l.written);  // stage counters start at zero
  auto* lanes = reinterpret_cast<executor::LaneExec*>(host);
  size_t next = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    const ImagePart& part = parts[p];
    const PartLayout& pl = l.parts[p];
    if (!part.ops.empty()) memcpy(host + pl.ops, part.ops.data(), part.ops.size() * sizeof(executor::OpBuffers));
    writePeerTables(part, pl, base, host);
    for (size_t i = 0; i < part.program->lanes.size(); ++i) {
      const executor::LaneExec L = writeLane(part, pl, i, base, host);
      memcpy(&lanes[next++], &L, sizeof(L));
    }
  }
  return Result::success();
}

void refreshLaneImage(const std::vector<ImagePart>& parts, const LaneImageLayout& layout, void* dst) {
  char* host = static_cast<char*>(dst);
  // Field by field, so every other byte stays as writeLaneImage left it.
  auto put = [host](size_t at, const auto& value) { memcpy(host + at, &value, sizeof value); };
  size_t lane = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    const ImagePart& part = parts[p];
    for (size_t i = 0; i < part.ops.size(); ++i) {
      const size_t at = layout.opBuffersAt(p, i);
      executor::OpBuffers written;
      memcpy(&written, host + at, sizeof written);
      memcpy(host + at, &part.ops[i], sizeof(executor::OpBuffers));
      put(at + offsetof(executor::OpBuffers, peers), written.peers);  // the peer table stays where it is
      put(at + offsetof(executor::OpBuffers, npeers), written.npeers);
    }
    for (size_t i = 0; i < part.program->lanes.size(); ++i, ++lane) {
      const size_t at = lane * sizeof(executor::LaneExec);
      const size_t wait = at + offsetof(executor::LaneExec, wait);
      put(at + offsetof(executor::LaneExec, failure), part.failureWord);
      put(wait + offsetof(executor::WaitControl, stopFlag), static_cast<const uint32_t*>(part.failureWord));
      put(wait + offsetof(executor::WaitControl, beacon),
          part.beacons ? part.beacons + i : static_cast<executor::LaneBeacon*>(nullptr));
    }
  }
}

}  // namespace braid::lanes
