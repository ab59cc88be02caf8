#include "engine/lanes/lane_group.h"

#include <map>

#include "engine/comm.h"
#include "engine/call_probe.h"
#include "engine/connect.h"
#include "engine/fingerprint.h"
#include "engine/lanes/comm_program.h"
#include "engine/lanes/host_lanes.h"
#include "engine/lanes/lane_image.h"

namespace braid::lanes {

namespace {

// Plans the communicator's calls and merges them into lanes.
Result plan(CommRun& run) {
  ncclComm* comm = run.comm;
  std::vector<const engine::Task*> tasks;
  for (const engine::Task& t : run.tasks) tasks.push_back(&t);
  CommProgram cp;
  BRAID_TRY(commProgramOf(tasks, LaneRunner::Host, &cp));
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
// connections and FIFOs of ranks on other hosts.
Result connect(std::vector<std::unique_ptr<CommRun>>& comms) {
  for (auto& c : comms) BRAID_TRY(c->comm->hostLanes->ports.offer(c->comm, portsOf(c->program), limitsOf(c->comm)));
  for (auto& c : comms) BRAID_TRY(c->comm->hostLanes->ports.accept(c->comm, portsOf(c->program), limitsOf(c->comm)));
  std::vector<engine::ConnectionNeed> needs;
  for (auto& c : comms) {
    const auto more = c->comm->hostLanes->ports.bridgeNeeds(c->comm, portsOf(c->program));
    needs.insert(needs.end(), more.begin(), more.end());
  }
  if (!needs.empty()) BRAID_TRY(connectAll(needs));
  for (auto& c : comms)
    BRAID_TRY(c->comm->hostLanes->ports.attachBridged(c->comm, portsOf(c->program), limitsOf(c->comm)));
  return Result::success();
}

// Lays the communicator's lanes out in host memory, resumable, to run in
// place. Every wait polls the communicator's abort flag itself.
Result buildImage(CommRun& c) {
  const PortTable& ports = c.comm->hostLanes->ports;
  const uint64_t stage = llStageBytesOf(c.comm);
  for (size_t i = 0; i < c.tasks.size(); ++i) c.ops.push_back(opBuffersOf(c, i));
  ImagePart part;
  part.program = &c.program;
  part.ops = c.ops;
  part.portOf = [&ports](const PortKey& k) { return ports.port(k); };
  part.abortWord = engine::abortWordOf(*c.comm);
  part.resumable = true;
  const std::vector<ImagePart> parts = {part};
  c.image.assign((laneImageBytes(parts, stage) + 7) / 8, 0);
  c.opsOffset = opBuffersOffset(parts, stage, 0, 0);
  return writeLaneImage(parts, stage, reinterpret_cast<uintptr_t>(c.image.data()), c.image.data());
}

// The calls' fingerprints, for peers that ask which call a message or a
// probe was (engine/call_probe.h).
void remember(const CommRun& c) {
  for (size_t i = 0; i < c.tasks.size(); ++i)
    rememberCall(c.comm, c.tasks[i], engine::callFingerprint(c.shapeFingerprints[i], c.tasks[i].callNumber));
}

}  // namespace

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
  for (auto& c : group->comms) {
    BRAID_TRY(plan(*c));
    remember(*c);
  }
  std::vector<ncclComm*> comms;
  for (auto& c : group->comms) comms.push_back(c->comm);
  BRAID_TRY(engine::preferFailureNotice(comms, connect(group->comms)));
  for (auto& c : group->comms) {
    BRAID_TRY(buildImage(*c));
    auto* lanes = reinterpret_cast<executor::LaneExec*>(c->image.data());
    for (size_t i = 0; i < c->program.lanes.size(); ++i)
      group->runs.push_back({c.get(), &c->program.lanes[i], &lanes[i]});
  }
  return Result::success();
}

void rebindLaneGroup(LaneGroup& group, const std::vector<engine::Task>& tasks) {
  CommRun& c = *group.comms.front();
  auto* image = reinterpret_cast<executor::OpBuffers*>(reinterpret_cast<char*>(c.image.data()) + c.opsOffset);
  for (size_t i = 0; i < tasks.size(); ++i) {
    // The cache key fixed the rest of the call.
    engine::Task& mine = c.tasks[i];
    mine.sendbuff = tasks[i].sendbuff;
    mine.recvbuff = tasks[i].recvbuff;
    mine.op = tasks[i].op;
    mine.deviceScalar = tasks[i].deviceScalar;
    mine.sequence = tasks[i].sequence;
    mine.callNumber = tasks[i].callNumber;
    // The scratch may have moved since (a larger group grew it).
    c.ops[i] = image[i] = opBuffersOf(c, i);
    rememberCall(c.comm, mine, c.ops[i].fingerprint);
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
