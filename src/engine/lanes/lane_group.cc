#include "engine/lanes/lane_group.h"

#include <algorithm>
#include <map>

#include "engine/comm.h"
#include "engine/call_probe.h"
#include "engine/connect.h"
#include "engine/fingerprint.h"
#include "engine/lanes/comm_program.h"
#include "engine/lanes/host_lanes.h"
#include "engine/lanes/lane_image.h"
#include "engine/lanes/peer_access.h"

namespace braid::lanes {

namespace {

// Plans the communicator's calls and merges them into lanes.
Result plan(CommRun& run, bool peerAccess) {
  ncclComm* comm = run.comm;
  std::vector<const engine::Task*> tasks;
  for (const engine::Task& t : run.tasks) tasks.push_back(&t);
  CommProgram cp;
  BRAID_TRY(commProgramOf(tasks, LaneRunner::Host, &cp, peerAccess));
  std::vector<char>& scratch = hostLanesOf(comm).scratch;
  if (scratch.size() < cp.scratchBytes) scratch.resize(cp.scratchBytes);
  run.scratchOffsets = std::move(cp.scratchOffsets);
  run.shapeFingerprints = std::move(cp.shapeFingerprints);
  run.program = std::move(cp.program);
  return Result::success();
}

executor::OpBuffers opBuffersOf(const CommRun& run, size_t i) {
  return lanes::opBuffersOf(run.tasks[i], run.comm->hostLanes->scratch.data() + run.scratchOffsets[i],
                            run.shapeFingerprints[i]);
}

// Same-host FIFOs (offer, then accept, for every communicator), then the
// connections and FIFOs of ranks on other hosts. Most new shapes use FIFOs
// that an earlier shape made: one look finds them all.
Result connect(std::vector<std::unique_ptr<CommRun>>& comms) {
  if (std::all_of(comms.begin(), comms.end(),
                  [](const auto& c) { return c->comm->hostLanes->ports.connected(portsOf(*c->program)); }))
    return Result::success();
  for (auto& c : comms) BRAID_TRY(c->comm->hostLanes->ports.offer(c->comm, portsOf(*c->program), limitsOf(c->comm)));
  for (auto& c : comms) BRAID_TRY(c->comm->hostLanes->ports.accept(c->comm, portsOf(*c->program), limitsOf(c->comm)));
  std::vector<engine::ConnectionNeed> needs;
  for (auto& c : comms) {
    const auto more = c->comm->hostLanes->ports.bridgeNeeds(c->comm, portsOf(*c->program));
    needs.insert(needs.end(), more.begin(), more.end());
  }
  if (!needs.empty()) BRAID_TRY(connectAll(needs));
  for (auto& c : comms)
    BRAID_TRY(c->comm->hostLanes->ports.attachBridged(c->comm, portsOf(*c->program), limitsOf(c->comm)));
  return Result::success();
}

// The communicator's lanes as an image part in host memory, resumable, to
// run in place. Every wait polls the communicator's abort flag itself. Its
// one call's peer table (when it addresses its peers) is sized, not filled.
ImagePart imagePartOf(CommRun& c, const PeerAccessGroups& peerAccess) {
  const PortTable& ports = c.comm->hostLanes->ports;
  ImagePart part;
  part.program = c.program.get();
  part.ops = c.ops;
  part.portOf = [&ports](const PortKey& k) { return ports.port(k); };
  part.abortWord = engine::abortWordOf(*c.comm);
  part.resumable = true;
  if (const auto it = peerAccess.find(c.comm); it != peerAccess.end())
    part.peerOps = {std::vector<uintptr_t>(it->second.size())};
  return part;
}

// Lays out every communicator's image, then writes each: a call that
// addresses its peers (peerAccess) gets the addresses of their OpBuffers,
// which are in their images. Each communicator's part is made once.
Result buildImages(std::vector<std::unique_ptr<CommRun>>& comms, const PeerAccessGroups& peerAccess) {
  std::vector<std::vector<ImagePart>> parts(comms.size());  // per communicator: its one part
  for (size_t r = 0; r < comms.size(); ++r) {
    CommRun& c = *comms[r];
    for (size_t i = 0; i < c.tasks.size(); ++i) c.ops.push_back(opBuffersOf(c, i));
    parts[r].push_back(imagePartOf(c, peerAccess));
    const LaneImageLayout layout = laneImageLayout(parts[r]);
    c.image.assign((layout.bytes + 7) / 8, 0);
    c.opsOffset = layout.opBuffersAt(0, 0);
  }
  const auto runOf = [&comms](const ncclComm* comm) -> const CommRun& {
    size_t r = 0;
    while (comms[r]->comm != comm) ++r;
    return *comms[r];
  };
  for (size_t r = 0; r < comms.size(); ++r) {
    CommRun& c = *comms[r];
    if (const auto it = peerAccess.find(c.comm); it != peerAccess.end())
      for (size_t k = 0; k < it->second.size(); ++k) {
        const CommRun& rank = runOf(it->second[k]);
        parts[r][0].peerOps[0][k] = reinterpret_cast<uintptr_t>(rank.image.data()) + rank.opsOffset;
      }
    BRAID_TRY(writeLaneImage(parts[r], reinterpret_cast<uintptr_t>(c.image.data()), c.image.data()));
  }
  return Result::success();
}

// The calls' fingerprints, for peers that ask which call a message or a
// probe was (engine/call_probe.h).
void remember(const CommRun& c) {
  for (size_t i = 0; i < c.tasks.size(); ++i)
    rememberCall(c.comm, c.tasks[i], engine::callFingerprint(c.shapeFingerprints[i], c.tasks[i].callNumber));
}

// What a call's OpBuffers are made of besides its number (opBuffersOf; the
// wire type is part of the cache key).
bool sameBuffersAndOp(const engine::Task& a, const engine::Task& b) {
  return a.sendbuff == b.sendbuff && a.recvbuff == b.recvbuff && a.fixedShifts == b.fixedShifts && a.op == b.op;
}

// Call i of the run becomes `t` (its buffers, reduction, numbers and
// reproducible mode's shifts; the cache key fixed the plan's shape, so the
// rest is the same). Its OpBuffers are rewritten in place, where the peer
// tables of its group (if any) point.
void rebindCall(CommRun& c, size_t i, const engine::Task& t) {
  auto* image = reinterpret_cast<executor::OpBuffers*>(reinterpret_cast<char*>(c.image.data()) + c.opsOffset);
  engine::Task& mine = c.tasks[i];
  const bool sameBinding = sameBuffersAndOp(mine, t);
  mine = t;
  char* const scratch = c.comm->hostLanes->scratch.data() + c.scratchOffsets[i];
  if (sameBinding && image[i].scratch == scratch) {
    // A loop's next call on the same buffers: only its fingerprint changes.
    const uint32_t fingerprint = engine::callFingerprint(c.shapeFingerprints[i], t.callNumber);
    c.ops[i].fingerprint = image[i].fingerprint = fingerprint;
    rememberCall(c.comm, mine, fingerprint);
    return;
  }
  // The scratch may have moved since (a larger group grew it). The peer
  // table, written with the image, stays.
  executor::OpBuffers ops = opBuffersOf(c, i);
  ops.peers = image[i].peers;
  ops.npeers = image[i].npeers;
  c.ops[i] = image[i] = ops;
  rememberCall(c.comm, mine, c.ops[i].fingerprint);
}

}  // namespace

PeerAccessGroups hostPeerAccess(const std::vector<engine::Task>& tasks) {
  std::vector<const engine::Task*> all;
  for (const engine::Task& t : tasks) all.push_back(&t);
  // One thread runs every lane of the group: any of its calls may share.
  return peerAccessGroups(all, [](const engine::Task&, const engine::Task&) { return true; });
}

Result prepareLaneGroup(const std::vector<engine::Task>& tasks, LaneGroup* group) {
  std::map<ncclComm*, CommRun*> byComm;
  for (const engine::Task& t : tasks) {
    CommRun*& run = byComm[t.comm];
    if (!run) {
      group->comms.push_back(std::make_unique<CommRun>());
      run = group->comms.back().get();
      run->comm = t.comm;
      run->ports = &hostLanesOf(t.comm).ports;
    }
    run->tasks.push_back(t);
  }
  group->peerAccess = hostPeerAccess(tasks);
  const PeerAccessGroups& peerAccess = group->peerAccess;
  for (auto& c : group->comms) {
    BRAID_TRY(plan(*c, peerAccess.count(c->comm) != 0));
    remember(*c);
  }
  std::vector<ncclComm*> comms;
  for (auto& c : group->comms) comms.push_back(c->comm);
  BRAID_TRY(engine::preferFailureNotice(comms, connect(group->comms)));
  BRAID_TRY(buildImages(group->comms, peerAccess));
  for (auto& c : group->comms) {
    auto* lanes = reinterpret_cast<executor::LaneExec*>(c->image.data());
    for (size_t i = 0; i < c->program->lanes.size(); ++i)
      group->runs.push_back({c.get(), &c->program->lanes[i], &lanes[i]});
  }
  return Result::success();
}

void rebindLaneGroup(LaneGroup& group, const std::vector<engine::Task>& tasks) {
  // The key fixed each call's communicator: its calls are its run's, in order.
  if (group.comms.size() == 1) {  // the commonest group: nothing to sort out
    for (size_t i = 0; i < tasks.size(); ++i) rebindCall(*group.comms.front(), i, tasks[i]);
    return;
  }
  std::vector<size_t> next(group.comms.size(), 0);
  for (const engine::Task& t : tasks) {
    size_t c = 0;
    while (group.comms[c]->comm != t.comm) ++c;
    rebindCall(*group.comms[c], next[c]++, t);
  }
}

int peerOfStep(const LaneRun& run, uint64_t step) {
  if (step >= run.lane->bound.steps.size()) return -1;
  const executor::ExecStep& s = run.lane->bound.steps[step];
  if (s.recvPort >= 0) return run.lane->bound.recvPeers[size_t(s.recvPort)];
  if (s.sendPort >= 0) return run.lane->bound.sendPeers[size_t(s.sendPort)];
  return -1;
}

}  // namespace braid::lanes
