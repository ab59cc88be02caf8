#include "core/group.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "core/comm.h"
#include "core/connect.h"
#include "core/call_check.h"
#include "core/task_plan.h"
#include "core/log.h"
#include "runtime/device/device.h"
#include "runtime/host/executor.h"
#include "runtime/lanes/lane_executor.h"
#include "schedule/generate.h"
#include "tuning/planner.h"

namespace braid {

namespace {

struct GroupState {
  int depth = 0;
  std::vector<Task> tasks;
  std::vector<std::function<Result()>> inits;
  Result error;  // first error of a call inside the group: the group will not run
};

thread_local GroupState tlsGroup;

// Everything one group asks of one communicator.
struct CommWork {
  int index = 0;
  size_t scratchBytes = 0;
  std::map<LaneKey, LaneWork> peerLanes;  // concatenated across operations
  std::vector<LaneWork> channelLanes;     // stage = the operation's position
  int stages = 0;
};

void noteNeeds(ncclComm* comm, const Lane& lane, std::set<std::tuple<ncclComm*, int, int, bool>>* seen,
               std::vector<ConnectionNeed>* needs) {
  for (const Step& s : lane.steps) {
    if (stepSends(s.kind) && seen->insert({comm, s.sendPeer, lane.channel, true}).second)
      needs->push_back({comm, s.sendPeer, lane.channel, true});
    if (stepReceives(s.kind) && seen->insert({comm, s.recvPeer, lane.channel, false}).second)
      needs->push_back({comm, s.recvPeer, lane.channel, false});
  }
}

LaneWork makeLaneWork(ncclComm* comm, const CommWork& cw, const Lane& lane, uint32_t opIndex, int stage) {
  LaneWork lw;
  lw.comm = comm;
  lw.channel = lane.channel;
  lw.stage = stage;
  lw.commIndex = cw.index;
  for (const Step& s : lane.steps) lw.steps.push_back({s, opIndex, nullptr, nullptr});
  return lw;
}

// Plans every task and records the connections the plans need.
void planTasks(const std::vector<Task>& tasks, HostWork* work, std::map<ncclComm*, CommWork>* perComm,
               std::vector<ConnectionNeed>* needs) {
  std::set<std::tuple<ncclComm*, int, int, bool>> seen;
  std::vector<size_t> scratchOffset;
  for (const Task& t : tasks) {
    auto [it, added] = perComm->try_emplace(t.comm);
    CommWork& cw = it->second;
    if (added) cw.index = static_cast<int>(perComm->size()) - 1;
    const uint32_t opIndex = static_cast<uint32_t>(work->ops.size());
    Plan plan = generatePlan(shapeOf(t));
    if (logEnabled(LogLevel::Trace, kLogColl))
      BRAID_TRACE(kLogColl, "%s plan:\n%s", collectiveName(t.coll), describePlan(plan).c_str());
    work->ops.push_back({static_cast<const char*>(t.sendbuff), static_cast<char*>(t.recvbuff), nullptr,
                         typeSize(t.type), t.op, t.coll, t.count, t.type, t.sequence});
    scratchOffset.push_back(cw.scratchBytes);
    cw.scratchBytes += (plan.scratchElems * typeSize(t.type) + 63) & ~size_t(63);
    bool usesChannels = false;
    for (const Lane& lane : plan.lanes) {
      noteNeeds(t.comm, lane, &seen, needs);
      if (lane.key.kind == LaneKind::Channel) {
        cw.channelLanes.push_back(makeLaneWork(t.comm, cw, lane, opIndex, cw.stages));
        usesChannels = true;
        continue;
      }
      auto [pl, fresh] = cw.peerLanes.try_emplace(lane.key, makeLaneWork(t.comm, cw, lane, opIndex, -1));
      if (!fresh)
        for (const Step& s : lane.steps) pl->second.steps.push_back({s, opIndex, nullptr, nullptr});
    }
    if (usesChannels) ++cw.stages;
  }
  // Scratch lives in the communicator and is reused by later groups.
  for (auto& [comm, cw] : *perComm)
    if (comm->scratch.size() < cw.scratchBytes) comm->scratch.resize(cw.scratchBytes);
  for (size_t i = 0; i < tasks.size(); ++i)
    work->ops[i].scratch = tasks[i].comm->scratch.data() + scratchOffset[i];
}

// Resolves every step's connections, now that they all exist.
void bindConnections(HostWork* work, std::map<ncclComm*, CommWork>* perComm) {
  std::set<SendConnection*> sends;
  auto bind = [&](ncclComm* comm, LaneWork& lane) {
    for (BoundStep& b : lane.steps) {
      if (stepSends(b.step.kind)) {
        b.send = comm->sendConns.at({b.step.sendPeer, lane.channel}).get();
        sends.insert(b.send);
      }
      if (stepReceives(b.step.kind)) b.recv = comm->recvConns.at({b.step.recvPeer, lane.channel}).get();
    }
    work->lanes.push_back(std::move(lane));
  };
  for (auto& [comm, cw] : *perComm) {
    for (auto& [key, lane] : cw.peerLanes) bind(comm, lane);
    for (LaneWork& lane : cw.channelLanes) bind(comm, lane);
  }
  work->sends.assign(sends.begin(), sends.end());
  work->ncomms = static_cast<int>(perComm->size());
}

Result prepareWork(const std::vector<Task>& tasks, HostWork* work) {
  std::map<ncclComm*, CommWork> perComm;
  std::vector<ConnectionNeed> needs;
  planTasks(tasks, work, &perComm, &needs);
  BRAID_TRY(connectAll(needs));
  bindConnections(work, &perComm);
  return Result::success();
}

// A rank that lost a peer tells the others, so that ranks waiting on someone
// else fail within moments instead of at their timeout. A notice this rank only
// received (no failed step of its own) is not passed on.
Result runAndReport(HostWork& work) {
  Result r = runHostWork(work);
  if (!r.ok() && r.code() == ncclRemoteError && work.failedComm && work.failedComm->bootstrap)
    work.failedComm->bootstrap->notifyFailure(r.message(), work.failedPeer, Clock::now() + std::chrono::seconds(1));
  return r;
}

// A lone operation (the common case: no group around it) runs from the
// communicator's plan cache; the first call of a shape plans and connects.
Result runSingleTask(const Task& t) {
  ncclComm* comm = t.comm;
  const PlanKey key = planKeyOf(t);
  CachedWork* cached = comm->planCache.find(key);
  if (!cached) {
    HostWork work;
    BRAID_TRY(prepareWork({t}, &work));
    cached = comm->planCache.insert(key, std::move(work));
  }
  // Planning sized comm->scratch for this plan (offset 0), and it never shrinks;
  // a later group may have moved it, hence the rebinding.
  rebindSingleOp(cached, t, comm->scratch.data());
  return runAndReport(cached->work);
}

Result runTasks(const std::vector<Task>& tasks) {
  // With NCCL_DEBUG_SUBSYS=TUNING every call is planned afresh, so that each one
  // logs its choice.
  if (tasks.size() == 1 && !logEnabled(LogLevel::Info, kLogTuning)) return runSingleTask(tasks.front());
  HostWork work;
  BRAID_TRY(prepareWork(tasks, &work));
  return runAndReport(work);
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

// Marks the communicators of a running group as busy, so that ncclCommAbort from
// another thread (which sets the abort flag, then waits for this to end) never
// frees a communicator under a running call.
class ActiveCalls {
 public:
  // Counted once per task (a communicator with two tasks counts twice): the
  // count only has to be non-zero while the group runs, and no list is built
  // on the path of every call.
  explicit ActiveCalls(const std::vector<Task>& tasks) : tasks_(tasks) {
    for (const Task& t : tasks_) t.comm->activeCalls.fetch_add(1);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  ~ActiveCalls() {
    for (const Task& t : tasks_) t.comm->activeCalls.fetch_sub(1);
  }
  ActiveCalls(const ActiveCalls&) = delete;
  ActiveCalls& operator=(const ActiveCalls&) = delete;
  bool aborted() const {
    return std::any_of(tasks_.begin(), tasks_.end(), [](const Task& t) { return t.comm->abortFlag != 0; });
  }

 private:
  const std::vector<Task>& tasks_;
};

// Holds the device work of the group's communicators while it runs on host
// buffers (pauseDeviceWork).
class DeviceWorkPause {
 public:
  explicit DeviceWorkPause(const std::vector<Task>& tasks) {
    for (const Task& t : tasks)
      if (t.comm->deviceProxy && std::find(comms_.begin(), comms_.end(), t.comm) == comms_.end()) {
        pauseDeviceWork(t.comm);
        comms_.push_back(t.comm);
      }
  }
  ~DeviceWorkPause() {
    for (ncclComm* comm : comms_) resumeDeviceWork(comm);
  }
  DeviceWorkPause(const DeviceWorkPause&) = delete;
  DeviceWorkPause& operator=(const DeviceWorkPause&) = delete;

 private:
  std::vector<ncclComm*> comms_;
};

// What a communicator's proxy thread runs for the staged copies of its calls
// on device buffers (src/runtime/device): the host path, on pinned memory.
// Runs a group's work on host memory (host buffers, or device buffers staged in
// pinned memory) with one choice of executor for both: the peers of one
// collective may pass either kind of buffer.
Result runHostExecutor(const std::vector<Task>& tasks) {
  return laneExecutorApplies(tasks) ? runLaneGroup(tasks) : runTasks(tasks);
}

Result runStagedTasks(const std::vector<Task>& tasks) {
  BRAID_TRY(checkCallsMatch(tasks));
  return runHostExecutor(tasks);
}

// Ends the group: its state is reset whatever happens, its first recorded
// error is returned, and its communicator creations run; its tasks are left
// to the caller.
Result closeGroup(GroupState& g, std::vector<Task>* tasks) {
  *tasks = std::move(g.tasks);
  std::vector<std::function<Result()>> inits = std::move(g.inits);
  Result error = std::move(g.error);
  g = GroupState();
  if (!error.ok()) return error;
  if (!inits.empty()) BRAID_TRY(runInits(inits));
  return Result::success();
}

// Leaves one level of ncclGroupStart; *outermost when the group is now over.
Result leaveGroupLevel(const char* fn, bool* outermost) {
  *outermost = false;
  if (tlsGroup.depth == 0) return fail(ncclInvalidUsage, "%s called without a matching ncclGroupStart", fn);
  *outermost = --tlsGroup.depth == 0;
  return Result::success();
}

Result runGroup(GroupState& g) {
  std::vector<Task> tasks;
  BRAID_TRY(closeGroup(g, &tasks));
  if (tasks.empty()) return Result::success();
  bool device = false;
  BRAID_TRY(classifyGroup(tasks, &device));
  for (Task& t : tasks) t.sequence = ++t.comm->opCount;
  ActiveCalls active(tasks);
  if (active.aborted()) return fail(ncclSystemError, "the communicator was aborted (ncclCommAbort)");
  Result r;
  if (device) {
    // Enqueued on the streams; errors of the host work reach ncclCommGetAsyncError.
    r = submitDeviceGroup(tasks, runStagedTasks);
  } else {
    // Device calls issued before run first, and graph launches wait: the
    // connections are used by one call at a time, in issue order.
    DeviceWorkPause pause(tasks);
    r = checkCallsMatch(tasks);
    if (r.ok()) r = runHostExecutor(tasks);
  }
  if (!r.ok()) {
    for (const Task& t : tasks) setCommError(t.comm, r);
  }
  return r;
}

}  // namespace

void groupStart() { ++tlsGroup.depth; }

bool inGroup() { return tlsGroup.depth > 0; }

Result groupEnd() {
  bool outermost = false;
  BRAID_TRY(leaveGroupLevel("ncclGroupEnd", &outermost));
  return outermost ? runGroup(tlsGroup) : Result::success();
}

// Communicators run their tasks one after another and concurrently with each
// other, so the group takes as long as its busiest communicator.
Result groupSimulateEnd(float* estimatedMicros) {
  bool outermost = false;
  BRAID_TRY(leaveGroupLevel("ncclGroupSimulateEnd", &outermost));
  if (!outermost) return Result::success();
  std::vector<Task> tasks;
  BRAID_TRY(closeGroup(tlsGroup, &tasks));
  std::map<ncclComm*, double> perComm;
  for (const Task& t : tasks) perComm[t.comm] += choosePlan(tuningInputOf(t)).predictedSeconds;
  double longest = 0;
  for (const auto& [comm, seconds] : perComm) longest = std::max(longest, seconds);
  *estimatedMicros = static_cast<float>(longest * 1e6);
  return Result::success();
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
