#include "engine/lanes/beacon_watch.h"

#include <algorithm>
#include <atomic>
#include <chrono>

#include "base/diagnosis_signal.h"
#include "engine/comm.h"

namespace braid::lanes {

namespace {

// How often the thread looks: a message that costs microseconds on the GPU
// is not slowed (the watch reads host memory only), and a lost peer or a
// notice ends the lanes within milliseconds.
constexpr auto kLookEvery = std::chrono::milliseconds(2);

}  // namespace

void watchLanes(LaneGroup* group, ncclComm* comm, PortTable* ports, std::vector<engine::Task> tasks,
                std::shared_ptr<const LaneProgram> program, const executor::LaneBeacon* beacons) {
  auto run = std::make_unique<CommRun>();
  run->comm = comm;
  run->ports = ports;
  run->tasks = std::move(tasks);
  run->program = std::move(program);
  for (size_t i = 0; i < run->program->lanes.size(); ++i)
    group->runs.push_back({run.get(), &run->program->lanes[i], nullptr, beacons + i});
  group->comms.push_back(std::move(run));
}

BeaconWatch::BeaconWatch(std::unique_ptr<LaneGroup> group, std::function<void()> abortLanes,
                         std::shared_ptr<const void> beacons, WatchedReplay replay)
    : beacons_(std::move(beacons)), group_(std::move(group)), abortLanes_(std::move(abortLanes)),
      watchdog_(*group_, diagnosisRequests()), replay_(std::move(replay)) {}

// A later launch of the graph bumps its count before it zeroes the beacons,
// and its lanes write them only after that: a look whose reads saw any of
// that sees the new count after this fence.
bool BeaconWatch::stillCurrent() const {
  if (!replay_.current) return true;
  std::atomic_thread_fence(std::memory_order_acquire);
  return replay_.current();
}

// A lane that has moved at all: the kernel runs (it may sit behind other work
// on its stream before that, which is no hang of braid's).
bool BeaconWatch::started() const {
  for (const LaneRun& run : group_->runs) {
    const executor::LaneBeacon& b = *run.beacon;
    if (executor::loadRelaxed(&b.step) | executor::loadRelaxed(&b.waitingOn) | executor::loadRelaxed(&b.beats) |
        executor::loadAcquire(&b.ended))
      return true;
  }
  return false;
}

bool BeaconWatch::poll() {
  if (over_) return false;
  over_ = !stillCurrent() || !look();
  if (over_ && replay_.ended && stillCurrent()) replay_.ended();
  return !over_;
}

bool BeaconWatch::look() {
  bool all = true;
  for (LaneRun& run : group_->runs) {
    if (!run.done) {
      const uint64_t ended = executor::loadAcquire(&run.beacon->ended);
      run.done = ended != 0;
      if (run.done) run.status = executor::ExecStatus(int32_t(ended) - 1);
    }
    all = all && run.done;
  }
  // A lane that failed on its own; the others of the launch end on its
  // failure word ("aborted": its echo, not a failure).
  for (const LaneRun& run : group_->runs)
    if (run.done && run.status != executor::ExecStatus::Ok && run.status != executor::ExecStatus::Aborted) {
      finish(laneFailure(run));
      return false;
    }
  if (all) return false;
  if (!started()) return true;
  const Stop stop = watchdog_.check();
  if (stop.why.ok()) return true;
  finish(stop);
  return false;
}

// The lanes end first (a peer that waits on them is told within moments by
// the notice), then every communicator of the launch fails with the reason.
void BeaconWatch::finish(const Stop& stop) {
  if (!stillCurrent()) return;  // a later launch's lanes: its own watch judges them
  abortLanes_();
  result_ = reportStop(stop);
  for (const auto& c : group_->comms) engine::setCommError(c->comm, result_);
}

WatchThread::~WatchThread() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void WatchThread::add(std::unique_ptr<Watch> watch) {
  std::lock_guard<std::mutex> lock(mu_);
  watches_.push_back(std::move(watch));
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  // A polling thread takes it at its next look (kLookEvery): waking it now
  // would cost this launch a system call and the thread a switch, for
  // nothing (its wait ends on stop_ only).
  if (idle_) cv_.notify_all();
}

void WatchThread::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stop_ || (watches_.empty() && polling_ == 0); });
}

void WatchThread::loop() {
  std::vector<std::unique_ptr<Watch>> active;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    for (auto& w : watches_) active.push_back(std::move(w));
    polling_ += watches_.size();
    watches_.clear();
    if (stop_) return;
    if (active.empty()) {
      idle_ = true;
      cv_.wait(lock, [this] { return stop_ || !watches_.empty(); });
      idle_ = false;
      continue;
    }
    lock.unlock();
    const size_t before = active.size();
    active.erase(std::remove_if(active.begin(), active.end(), [](const auto& w) { return !w->poll(); }),
                 active.end());
    lock.lock();
    polling_ -= before - active.size();
    if (before != active.size()) cv_.notify_all();
    cv_.wait_for(lock, kLookEvery, [this] { return stop_; });
  }
}

}  // namespace braid::lanes
