// The watchdog of lanes the host neither runs nor can read: a plan kernel's,
// whose memory is on the device. Each lane publishes its place and its end in
// a beacon in host-visible memory (executor::LaneBeacon); a host thread looks at
// the beacons with the one watchdog of the host runner (lane_watchdog.h):
// BRAID_TIMEOUT from the moment the kernel started, with the same diagnosis
// lines and rank 0's summary; SIGUSR1; failure notices from other ranks; a
// peer process that died while a lane waits on it; mismatch probes. When it
// stops the lanes it raises the words their waits poll (the abort word), sets
// the error every communicator of the launch reports from
// ncclCommGetAsyncError, and tells the other ranks, as the host runner does.
// A lane that fails on the device is reported and told the same way.
// CUDA-free: the CPU tests run lanes as blocks on threads under it.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/lanes/lane_group.h"
#include "engine/lanes/lane_watchdog.h"

namespace braid::lanes {

// What a WatchThread polls: poll() looks once, and says false once there is
// nothing more to watch.
class Watch {
 public:
  virtual ~Watch() = default;
  virtual bool poll() = 0;
};

// A watch of one launch of a CUDA graph, whose every launch runs the same
// lanes on the same beacons (engine/device/cuda_lane_launch.cc). `current`:
// false once a later launch of the graph has taken the beacons over (it is
// counted before it zeroes them): this watch then ends at once, unreported,
// whatever it read since it last was current. `ended`: runs once
// when the watch ends while current (every lane ended, or it stopped them).
struct WatchedReplay {
  std::function<bool()> current;
  std::function<void()> ended;
};

class BeaconWatch : public Watch {
 public:
  // `group`: the launch's communicators (each CommRun's comm, tasks, program
  // and ports) and its lanes, each LaneRun with its beacon and no exec.
  // `abortLanes` raises the words every lane's waits poll. `beacons` keeps
  // the lanes' beacons from another launch while the watch reads them.
  BeaconWatch(std::unique_ptr<LaneGroup> group, std::function<void()> abortLanes,
              std::shared_ptr<const void> beacons = nullptr, WatchedReplay replay = {});
  BeaconWatch(const BeaconWatch&) = delete;
  BeaconWatch& operator=(const BeaconWatch&) = delete;

  // One look; false once there is nothing more to watch (every lane ended,
  // or the watch stopped them and reported why).
  bool poll() override;
  // The error the watch reported (success while none).
  const Result& result() const { return result_; }

 private:
  bool started() const;
  bool look();
  // Whether what the watch read since it was last current is still this
  // launch's (always, outside graphs).
  bool stillCurrent() const;
  void finish(const Stop& stop);

  std::shared_ptr<const void> beacons_;  // released after the watchdog (declared first)
  std::unique_ptr<LaneGroup> group_;
  std::function<void()> abortLanes_;
  LaneWatchdog watchdog_;
  WatchedReplay replay_;
  bool over_ = false;  // poll returned false
  Result result_;
};

// Adds one communicator's lanes to a group to watch: lane i of `program`
// (the program the launch's image was written from) seen through beacons[i].
void watchLanes(LaneGroup* group, ncclComm* comm, PortTable* ports, std::vector<engine::Task> tasks,
                std::shared_ptr<const LaneProgram> program, const executor::LaneBeacon* beacons);

// One thread that polls the watches of a communicator's launches (and of
// its CUDA graphs' launches, for as long as each graph exists), started with
// the first and idle (on a condition variable) while none is active.
// Destruction stops it; watches still active are dropped unreported.
class WatchThread {
 public:
  WatchThread() = default;
  ~WatchThread();
  WatchThread(const WatchThread&) = delete;
  WatchThread& operator=(const WatchThread&) = delete;

  void add(std::unique_ptr<Watch> watch);
  // Waits until every watch added so far has ended (tests; destruction).
  void drain();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Watch>> watches_;
  size_t polling_ = 0;  // watches the thread took and has not finished
  bool idle_ = false;   // the thread waits for a watch (else it polls, and looks again soon)
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace braid::lanes
