// The proxy thread of one communicator's device calls: it waits until a job's
// contributions are in pinned memory, runs the host plan on them and publishes
// the job's sequence to the stream-wait kernels. Calls issued outside graphs
// run in issue order; a call captured in a CUDA graph runs each time a launch
// of the graph reaches it on its stream (kernels/README.md).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "base/result.h"
#include "engine/device/cuda_staging.h"
#include "engine/device/device.h"
#include "engine/lanes/beacon_watch.h"
#include "engine/lanes/bridge_pump.h"
#include "engine/lanes/port_table.h"
#include "engine/task.h"
#include "kernels/executor/plan_kernel.h"

namespace braid::device {

// Threads of a plan-kernel lane (one CUDA block).
constexpr uint32_t kThreadsPerLane = 256;

// An owned CUDA event (timing disabled).
class CudaEvent {
 public:
  CudaEvent() = default;
  ~CudaEvent();
  CudaEvent(CudaEvent&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& o) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  Result record(cudaStream_t stream);  // creates the event on first use
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// An event of an EventPool, recorded once and then shared by whatever waits
// on or queries that record (a launch's end: its kept block, each of its
// communicators' next kernel, its staging memory). It goes back to its pool
// when the last holder drops it: CUDA lets an event be recorded again once
// the waits on its last record are enqueued, but a holder may still query it.
class PooledEvent {
 public:
  struct Free {
    std::mutex mu;
    std::vector<CudaEvent> events;
  };
  PooledEvent(CudaEvent event, std::weak_ptr<Free> home) : event_(std::move(event)), home_(std::move(home)) {}
  ~PooledEvent();
  PooledEvent(const PooledEvent&) = delete;
  PooledEvent& operator=(const PooledEvent&) = delete;
  cudaEvent_t get() const { return event_.get(); }

 private:
  CudaEvent event_;
  std::weak_ptr<Free> home_;  // gone with the pool: the event is destroyed instead
};
using SharedEvent = std::shared_ptr<const PooledEvent>;

// A communicator's events for stream order (one device): a plan kernel launch
// records one for its end and one per stream it joins, instead of making and
// destroying events on every call (each a driver call on the critical path).
class EventPool {
 public:
  EventPool() = default;
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  // An event no one holds (made on the current device when none is free),
  // recorded on `stream`.
  Result record(cudaStream_t stream, SharedEvent* out);

 private:
  std::shared_ptr<PooledEvent::Free> free_ = std::make_shared<PooledEvent::Free>();
};

// What the proxy runs for one communicator's calls of one group, or for one
// launch of a graph that captured such calls.
struct DeviceJob {
  uint64_t sequence = 0;          // the calls' operation number (for messages)
  // Outside graphs: what its stream-wait kernels wait for, published when its
  // host work ends, failed or not (set by DeviceProxy::submit, in issue order).
  uint64_t waitValue = 0;
  bool captured = false;          // a graph launch: its ticket is published instead
  uint64_t ticket = 0;            // a graph launch's, in the order launches reached the proxy
  std::vector<engine::Task> staged;  // the calls, their buffers in pinned memory
  std::vector<CudaEvent> ready;   // recorded after the copies of the contributions (not in graphs)
  StagedRunner run;
};

// Staging memory of a job, in use until the copies back to the device are done.
struct InflightJob {
  std::vector<PinnedBlock> blocks;
  std::shared_ptr<BeaconLease> beacons;  // a plan kernel's lanes' (none: null)
  std::vector<SharedEvent> done;
};

class LaunchPort;
class LaunchCache;  // cuda_launch_cache.h

class DeviceProxy;

// A plan-kernel launch captured in a CUDA graph (BRAID_GRAPH_ENGINE=kernels,
// cuda_lane_launch.cc): each launch of the graph copies the lanes' image
// (written once, in the job's pinned block) into `block`, for which its
// pointers were written; a kernel counts the launch in `launchCount` and
// zeroes the beacons (kernels/launch_mark.h); then the plan kernel runs. The
// first communicator's watch thread sees the count and watches that launch.
struct CapturedLanes {
  DeviceProxy* owner = nullptr;  // the launch's first communicator's: frees `block`
  void* block = nullptr;         // device memory (cudaMalloc) for the image and scratch
  size_t blockBytes = 0;
  uint64_t* gate = nullptr;      // after the block: of the image each launch carries
  // The lanes', the failure word's and the count's (one beacon each), as long
  // as the job lives: its watches keep it.
  std::shared_ptr<BeaconLease> beacons;
  executor::LaneBeacon* firstBeacon = nullptr;
  uint32_t zeroedWords = 0;  // the lanes' and the failure word's beacons, in 64-bit words
  uint64_t* launchCount = nullptr;  // mapped: launches of the graph so far
  // The watch of launch number `launch` (1, 2, ...); `keep` keeps the job's
  // beacons while it reads them.
  std::function<std::unique_ptr<lanes::BeaconWatch>(uint64_t launch, std::shared_ptr<const void> keep)> watchOf;
  std::atomic<bool> running{false};  // a launch's kernel is counted outstanding (base/cuda_quiet_free.h)
};

// One communicator's calls of one group captured in a CUDA graph: what each
// launch of the graph submits again, and the staging memory its copies use;
// or (`lanes` set) a plan-kernel launch of the group's communicators on one
// device. Owned by the graph (released when the graph, its executable graphs
// and their launches are all done) and by the proxies, the first of which
// frees the memory after that.
struct CapturedJob {
  uint64_t sequence = 0;  // the calls' operation number at capture, for messages
  std::vector<engine::Task> staged;
  StagedRunner run;
  std::vector<PinnedBlock> blocks;
  MappedSlot ticket;  // each launch's ticket, read by its stream-wait kernel
  std::shared_ptr<LaunchPort> port;
  std::atomic<uint64_t> lastTicket{0};  // of the latest launch
  std::atomic<bool> released{false};    // by the graph: no launch will come
  std::unique_ptr<CapturedLanes> lanes;
  // A plan-kernel launch's other communicators' ports: a launch of the graph
  // is not watched once one of them is destroyed.
  std::vector<std::shared_ptr<LaunchPort>> otherPorts;
};

// The largest blocks of a communicator's pinned reserve: the staged path
// carries a call through pinned memory in pieces that fit one.
constexpr size_t kStagingBlockMax = size_t(1) << 20;

class DeviceProxy {
 public:
  DeviceProxy(ncclComm* comm, int device);
  // Stops the thread (queued jobs run first, or fail at once after an abort),
  // then frees the staging memory once the streams are done with it. Graphs
  // that still exist keep theirs (leaked): a launch after this submits nothing.
  ~DeviceProxy();
  DeviceProxy(const DeviceProxy&) = delete;
  DeviceProxy& operator=(const DeviceProxy&) = delete;

  Result start();
  int device() const { return device_; }
  // What plan-kernel launches need to know of its device (how many lanes it
  // holds resident at once, whether it launches cooperatively, its compute
  // capability), asked once when it starts: a launch asks the device nothing.
  const executor::PlanDevice& planDevice() const { return planDevice_; }
  uint32_t residentPlanLanes() const { return planDevice_.residentLanes; }
  ncclComm* comm() const { return comm_; }
  StagingPool& pool() { return pool_; }
  // A pinned block for a call's staging or a launch's lane image: from the
  // reserve; when none is free, once this communicator's earlier device work
  // has returned its blocks (waiting up to a second); only then a new one
  // (said once at INFO: cudaHostAlloc may wait for every kernel running).
  Result stagingBlock(size_t bytes, PinnedBlock* out);
  const MappedWords& words() const { return words_; }
  MappedBeacons& beacons() { return beacons_; }
  // Watches this communicator's plan kernels (lanes/beacon_watch.h).
  lanes::WatchThread& watch() { return watch_; }

  // Queues a job issued outside graphs; returns its waitValue.
  uint64_t submit(DeviceJob&& job);
  void drain();
  // Waits for the queued calls and the running job, then leaves graph launches
  // queued until resume() (a call on host buffers uses the connections).
  void pause();
  void resume();
  void abort() { words_.setAbort(); }
  void addInflight(InflightJob&& job);
  // Returns the blocks of finished jobs, and of captured jobs whose graphs are
  // gone, to the pool.
  // Then, with none of its own left, frees what destroyed communicators kept
  // if no kernel of braid's is outstanding (base/cuda_quiet_free.h).
  void reclaim();

  // Takes a captured job (its staged calls and blocks set) before anything of
  // it is enqueued: gives it its ticket word and to `graph`. On failure the
  // job's memory returns to the pool once nothing can use it; enqueue nothing.
  Result adoptCaptured(const std::shared_ptr<CapturedJob>& job, cudaGraph_t graph);
  // A plan-kernel launch's job adopted by its first communicator's proxy:
  // this one (another communicator of the launch) keeps it too, so that its
  // destruction leaves what the graph's launches use (FIFOs, words).
  void shareCaptured(const std::shared_ptr<CapturedJob>& job);
  std::shared_ptr<LaunchPort> launchPort() const { return port_; }
  // Enqueues (captures) on `stream` the host function that submits the job at
  // each launch; after the copies of its contributions.
  Result enqueueLaunch(CapturedJob* job, cudaStream_t stream);
  // From a launch's host function (through its LaunchPort): no CUDA call.
  void submitLaunch(CapturedJob& job) noexcept;

  // BRAID_DEVICE_ENGINE=kernels: the FIFOs of this communicator's plan kernels, in
  // device memory (made on first use), and their order: a kernel launched on
  // another stream than the previous one first waits for it, since both use
  // the same FIFOs and Ports.
  lanes::PortTable& lanePorts();
  // The thread that pumps those FIFOs' network bridge while plan kernels run
  // (lanes/bridge_pump.h); null while no FIFO is bridged.
  lanes::BridgePump* bridgePump();
  // The pump bridgePump() made, without making one (other threads than the
  // launching ones).
  lanes::BridgePump* madeBridgePump() const { return bridgePump_.get(); }
  // BRAID_DEVICE_ENGINE=kernels: this communicator's launches kept per shape.
  LaunchCache& launchCache() { return *launchCache_; }
  Result orderLaneKernel(cudaStream_t stream);
  // `done`: recorded on `stream` after the kernel.
  void noteLaneKernel(cudaStream_t stream, SharedEvent done);
  EventPool& events() { return events_; }

 private:
  void loop();
  bool next(DeviceJob* job);
  void runJob(DeviceJob& job);
  void runArrivedLaunches();
  Result skipReason() const;
  Result waitReady(DeviceJob& job);
  bool finished(const InflightJob& job) const;
  // Waits (bounded) for every inflight job, then aborts what still runs and
  // waits briefly again; false when some did not finish even then.
  bool waitInflight();
  bool waitInflightFor(std::chrono::milliseconds wait);
  bool reclaimInflight();  // true when none is left
  void reclaimCapturedLocked();  // inflightMu_ held

  ncclComm* comm_;
  int device_;
  executor::PlanDevice planDevice_;
  StagingPool pool_;
  MappedWords words_;
  MappedSlots tickets_;
  std::shared_ptr<LaunchPort> port_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<DeviceJob> queue_;     // issued outside graphs, in issue order
  std::deque<DeviceJob> launches_;  // graph launches, in ticket order
  uint64_t lastTicket_ = 0;
  uint64_t lastWaitValue_ = 0;
  bool busy_ = false;
  bool paused_ = false;  // launches wait: a call on host buffers runs
  bool stop_ = false;
  std::atomic<bool> lostLaunch_{false};  // a launch could not be queued (out of memory)
  std::atomic<bool> grewPool_{false};  // the reserve ran short once (logged)
  bool failed_ = false;  // proxy thread only: later jobs are skipped
  std::mutex inflightMu_;
  std::vector<InflightJob> inflight_;
  std::vector<std::shared_ptr<CapturedJob>> captured_;
  std::unique_ptr<lanes::PortTable> lanePorts_;
  std::unique_ptr<lanes::BridgePump> bridgePump_;  // after lanePorts_: stopped before its bridge goes
  std::unique_ptr<LaunchCache> launchCache_;
  EventPool events_;
  SharedEvent laneKernelDone_;  // null before the first plan kernel
  cudaStream_t laneStream_ = nullptr;
  MappedBeacons beacons_;
  std::thread thread_;
  // Last: stopped first at destruction, while the rest it may read lives.
  lanes::WatchThread watch_;
};

// Where graph launches submit their jobs: the proxy while it lives. A graph
// may outlive its communicator; its launches then submit nothing.
class LaunchPort {
 public:
  explicit LaunchPort(DeviceProxy* proxy) : proxy_(proxy) {}
  // From a CUDA host function: takes two mutexes, makes no CUDA call.
  void submit(CapturedJob& job);
  // From a graph launch's watch: the proxy's bridge pump, if it has one,
  // pumps until `ended` says true (lanes/bridge_pump.h); nothing once the
  // proxy is gone.
  void pumpUntil(std::function<bool()> ended);
  void close();
  bool open();  // the proxy lives

 private:
  std::mutex mu_;
  DeviceProxy* proxy_;
};

}  // namespace braid::device
