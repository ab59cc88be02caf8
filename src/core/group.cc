#include "core/group.h"

#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "core/comm.h"
#include "core/connect.h"
#include "core/log.h"
#include "runtime/host/executor.h"
#include "schedule/generate.h"

namespace braid {

namespace {

struct GroupState {
  int depth = 0;
  std::vector<Task> tasks;
  std::vector<std::function<Result()>> inits;
  Result error;  // first error of a call inside the group: the group will not run
};

thread_local GroupState tlsGroup;

CollShape shapeOf(const Task& t) {
  CollShape s;
  s.coll = t.coll;
  s.rank = t.comm->rank;
  s.nranks = t.comm->nranks;
  s.count = t.count;
  s.root = t.root;
  s.chunkElems = std::max<size_t>(1, t.comm->settings.slotBytes / typeSize(t.type));
  s.nchannels = t.comm->settings.nchannels;
  return s;
}

// Generators put channel lanes on their own channel and peer lanes on kPeerChannel.
int laneChannel(const LaneKey& key) {
  return key.kind == LaneKind::Channel ? key.index : kPeerChannel;
}

// A communicator's lanes for the whole group: equal keys concatenate in call order.
struct CommLanes {
  std::map<LaneKey, LaneWork> lanes;
};

Result bindSteps(HostWork* work, std::map<ncclComm*, CommLanes>* perComm,
                 std::vector<ConnectionNeed>* needs, const std::vector<Task>& tasks) {
  std::set<std::tuple<ncclComm*, int, int, bool>> seen;
  for (const Task& t : tasks) {
    const uint32_t opIndex = static_cast<uint32_t>(work->ops.size());
    work->ops.push_back({static_cast<const char*>(t.sendbuff), static_cast<char*>(t.recvbuff),
                         typeSize(t.type), t.op});
    Plan plan = generatePlan(shapeOf(t));
    if (logEnabled(LogLevel::Trace, kLogColl))
      BRAID_TRACE(kLogColl, "%s plan:\n%s", collectiveName(t.coll), describePlan(plan).c_str());
    CommLanes& cl = (*perComm)[t.comm];
    for (Lane& lane : plan.lanes) {
      LaneWork& lw = cl.lanes[lane.key];
      lw.comm = t.comm;
      for (const Step& s : lane.steps) {
        lw.steps.push_back({s, opIndex, nullptr, nullptr});
        const int channel = laneChannel(lane.key);
        if (stepSends(s.kind) && seen.insert({t.comm, s.sendPeer, channel, true}).second)
          needs->push_back({t.comm, s.sendPeer, channel, true});
        if (stepReceives(s.kind) && seen.insert({t.comm, s.recvPeer, channel, false}).second)
          needs->push_back({t.comm, s.recvPeer, channel, false});
      }
    }
  }
  return Result::success();
}

// Resolves every step's connections, now that they all exist.
void resolveConnections(HostWork* work, std::map<ncclComm*, CommLanes>* perComm) {
  std::set<SendConnection*> sends;
  for (auto& [comm, cl] : *perComm) {
    for (auto& [key, lane] : cl.lanes) {
      const int channel = laneChannel(key);
      for (BoundStep& b : lane.steps) {
        if (stepSends(b.step.kind)) {
          b.send = comm->sendConns.at({b.step.sendPeer, channel}).get();
          sends.insert(b.send);
        }
        if (stepReceives(b.step.kind)) {
          b.recv = comm->recvConns.at({b.step.recvPeer, channel}).get();
        }
      }
      work->lanes.push_back(std::move(lane));
    }
  }
  work->sends.assign(sends.begin(), sends.end());
}

Result runTasks(const std::vector<Task>& tasks) {
  HostWork work;
  std::map<ncclComm*, CommLanes> perComm;
  std::vector<ConnectionNeed> needs;
  BRAID_TRY(bindSteps(&work, &perComm, &needs, tasks));
  BRAID_TRY(connectAll(needs));
  resolveConnections(&work, &perComm);
  return runHostWork(work);
}

Result runInits(std::vector<std::function<Result()>>& inits) {
  if (inits.size() == 1) return inits[0]();
  std::vector<Result> results(inits.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inits.size(); ++i)
    threads.emplace_back([&, i] { results[i] = inits[i](); });
  for (auto& th : threads) th.join();
  for (Result& r : results)
    if (!r.ok()) return r;
  return Result::success();
}

Result runGroup(GroupState& g) {
  std::vector<Task> tasks = std::move(g.tasks);
  std::vector<std::function<Result()>> inits = std::move(g.inits);
  Result error = std::move(g.error);
  g = GroupState();
  if (!error.ok()) return error;
  if (!inits.empty()) BRAID_TRY(runInits(inits));
  if (tasks.empty()) return Result::success();
  for (const Task& t : tasks) ++t.comm->opCount;
  Result r = runTasks(tasks);
  if (!r.ok()) {
    for (const Task& t : tasks) setCommError(t.comm, r);
  }
  return r;
}

}  // namespace

void groupStart() { ++tlsGroup.depth; }

bool inGroup() { return tlsGroup.depth > 0; }

Result groupEnd() {
  if (tlsGroup.depth == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd called without a matching ncclGroupStart");
  if (--tlsGroup.depth > 0) return Result::success();
  return runGroup(tlsGroup);
}

void groupFail(const Result& r) {
  if (tlsGroup.depth > 0 && tlsGroup.error.ok()) tlsGroup.error = r;
}

Result enqueueTask(const Task& task) {
  tlsGroup.tasks.push_back(task);
  if (tlsGroup.depth > 0) return Result::success();
  return runGroup(tlsGroup);
}

Result enqueueInit(std::function<Result()> init) {
  tlsGroup.inits.push_back(std::move(init));
  if (tlsGroup.depth > 0) return Result::success();
  return runGroup(tlsGroup);
}

}  // namespace braid
