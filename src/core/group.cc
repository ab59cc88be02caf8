#include "core/reproducible.h"
#include "core/group.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <utility>

#include "base/log.h"
#include "core/call_check.h"
#include "engine/comm.h"
#include "engine/device/device.h"
#include "engine/fingerprint.h"
#include "engine/lanes/lane_executor.h"
#include "engine/task_plan.h"
#include "tuning/planner.h"

namespace braid::core {

namespace {

struct GroupState {
  int depth = 0;
  std::vector<engine::Task> tasks;
  std::vector<std::function<Result()>> inits;
  // Reproducible-mode calls (core/reproducible.h): each runs as its own small
  // collectives after the group's other calls, in issue order (the same on
  // every rank, as the group's calls are).
  std::vector<engine::Task> reproducible;
  Result error;  // first error of a call inside the group: the group will not run
  // The buffer of the last group's task list, empty: the next group's list
  // takes it, so that a lone call (the commonest group) allocates nothing.
  std::vector<engine::Task> spare;
};

thread_local GroupState tlsGroup;

Result runInits(std::vector<std::function<Result()>>& inits) {
  if (inits.size() == 1) return inits[0]();
  std::vector<Result> results(inits.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < inits.size(); ++i)
    threads.emplace_back([&, i] { results[i] = guarded("creating a communicator", inits[i]); });
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
  // The count's increments and aborted()'s loads are seq_cst, as ncclCommAbort's
  // store of the flag and load of the count are: either this sees the flag or
  // that sees the count (no fence needed; on x86 the increment is one).
  explicit ActiveCalls(const std::vector<engine::Task>& tasks) : tasks_(tasks) {
    for (const engine::Task& t : tasks_) t.comm->activeCalls.fetch_add(1);
  }
  ~ActiveCalls() {
    for (const engine::Task& t : tasks_) t.comm->activeCalls.fetch_sub(1);
  }
  ActiveCalls(const ActiveCalls&) = delete;
  ActiveCalls& operator=(const ActiveCalls&) = delete;
  bool aborted() const {
    return std::any_of(tasks_.begin(), tasks_.end(),
                       [](const engine::Task& t) { return t.comm->abortFlag.load() != 0; });
  }

 private:
  const std::vector<engine::Task>& tasks_;
};

// Holds the device work of the group's communicators while it runs on host
// buffers (pauseDeviceWork).
class DeviceWorkPause {
 public:
  explicit DeviceWorkPause(const std::vector<engine::Task>& tasks) {
    for (const engine::Task& t : tasks)
      if (t.comm->deviceProxy && std::find(comms_.begin(), comms_.end(), t.comm) == comms_.end()) {
        device::pauseDeviceWork(t.comm);
        comms_.push_back(t.comm);
      }
  }
  ~DeviceWorkPause() {
    for (ncclComm* comm : comms_) device::resumeDeviceWork(comm);
  }
  DeviceWorkPause(const DeviceWorkPause&) = delete;
  DeviceWorkPause& operator=(const DeviceWorkPause&) = delete;

 private:
  std::vector<ncclComm*> comms_;
};

// The group's calls, checked (BRAID_CHECK) and run by the host runner: on the
// calling thread for host buffers, and on a communicator's proxy thread for
// the staged copies of device buffers (src/engine/device; the peers of one
// collective may pass either kind of buffer). An exception fails the group.
Result runChecked(const std::vector<engine::Task>& tasks) {
  return guarded("running the group", [&] {
    BRAID_TRY(checkCallsMatch(tasks));
    return lanes::runLaneGroup(tasks);
  });
}

// The task list of the group being run, in the thread's spare buffer, which
// goes back to the thread's state afterwards (unless a group run meanwhile,
// from a callback, gave its own back first).
class RunningTasks {
 public:
  explicit RunningTasks(GroupState& g) : g_(g), tasks_(std::move(g.spare)) { tasks_.clear(); }
  ~RunningTasks() {
    if (g_.spare.capacity() != 0) return;
    tasks_.clear();
    g_.spare = std::move(tasks_);
  }
  RunningTasks(const RunningTasks&) = delete;
  RunningTasks& operator=(const RunningTasks&) = delete;
  std::vector<engine::Task>& list() { return tasks_; }

 private:
  GroupState& g_;
  std::vector<engine::Task> tasks_;
};

// Ends the group: its state is reset whatever happens, its first recorded
// error is returned, and its communicator creations run; its tasks are left
// to the caller (in *tasks, whose empty buffer the group's next list takes).
Result closeGroup(GroupState& g, std::vector<engine::Task>* tasks) {
  tasks->clear();
  tasks->swap(g.tasks);
  std::vector<std::function<Result()>> inits;
  inits.swap(g.inits);
  Result error = std::exchange(g.error, Result());
  g.depth = 0;
  g.reproducible.clear();
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

Result runGroupCalls(GroupState& g) {
  RunningTasks running(g);
  std::vector<engine::Task>& tasks = running.list();
  BRAID_TRY(closeGroup(g, &tasks));
  if (tasks.empty()) return Result::success();
  bool device = false;
  BRAID_TRY(device::classifyGroup(tasks, &device));
  for (engine::Task& t : tasks) {
    t.sequence = ++t.comm->opCount;
    t.callNumber = nextCallNumber(t.comm, t);
  }
  ActiveCalls active(tasks);
  if (active.aborted()) return fail(ncclSystemError, "the communicator was aborted (ncclCommAbort)");
  Result r;
  if (device) {
    // Enqueued on the streams; errors of the host work reach ncclCommGetAsyncError.
    r = device::submitDeviceGroup(tasks, runChecked);
  } else {
    // Device calls issued before run first, and graph launches wait: the
    // connections are used by one call at a time, in issue order.
    DeviceWorkPause pause(tasks);
    r = runChecked(tasks);
  }
  if (!r.ok()) {
    for (const engine::Task& t : tasks) engine::setCommError(t.comm, r);
  }
  return r;
}

Result runGroup(GroupState& g) {
  if (g.reproducible.empty()) return runGroupCalls(g);
  const std::vector<engine::Task> deferred = std::exchange(g.reproducible, {});
  BRAID_TRY(runGroupCalls(g));
  for (const engine::Task& t : deferred) BRAID_TRY(reproducible::run(t));
  return Result::success();
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
  std::vector<engine::Task> tasks;
  BRAID_TRY(closeGroup(tlsGroup, &tasks));
  std::map<ncclComm*, double> perComm;
  for (const engine::Task& t : tasks) perComm[t.comm] += choosePlan(tuningInputOf(t)).predictedSeconds;
  double longest = 0;
  for (const auto& [comm, seconds] : perComm) longest = std::max(longest, seconds);
  *estimatedMicros = static_cast<float>(longest * 1e6);
  return Result::success();
}

void groupFail(const Result& r) {
  if (tlsGroup.depth > 0 && tlsGroup.error.ok()) tlsGroup.error = r;
}

Result enqueueTask(const engine::Task& task) {
  GroupState& g = tlsGroup;  // one thread-local lookup, not one per use
  if (reproducible::applies(task)) {
    if (g.depth == 0) return reproducible::run(task);
    g.reproducible.push_back(task);
    return Result::success();
  }
  g.tasks.push_back(task);
  g.tasks.back().wire = wireTypeFor(task);
  if (g.depth > 0) return Result::success();
  return runGroup(g);
}

Result enqueueInit(std::function<Result()> init) {
  tlsGroup.inits.push_back(std::move(init));
  if (tlsGroup.depth > 0) return Result::success();
  return runGroup(tlsGroup);
}

}  // namespace braid::core
