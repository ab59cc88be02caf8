#include "engine/device/cuda_proxy.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "base/cuda_quiet_free.h"
#include "base/cuda_util.h"
#include "base/log.h"
#include "engine/comm.h"
#include "engine/device/cuda_capture.h"
#include "engine/device/cuda_lane_memory.h"
#include "engine/device/cuda_launch_cache.h"
#include "kernels/executor/plan_kernel.h"
#include "kernels/launch_mark.h"
#include "kernels/stream_wait.h"

namespace braid::device {

namespace {

// How long destruction waits for the streams to finish with staging memory
// before it leaks the memory rather than free it under a copy.
constexpr auto kReleaseWait = std::chrono::seconds(30);
// Staging blocks made with the proxy (about 7 MiB): eight of each size class
// from 4 KiB to 64 KiB (small calls, lane images: several queued on a
// stream), two of each up to 512 KiB, four of 1 MiB.
constexpr size_t kSmallClassMax = size_t(64) << 10;
constexpr size_t kSmallPerClass = 8;
constexpr size_t kLargeClassMax = kStagingBlockMax;
constexpr size_t kLargePerClass = 2;
// Blocks of the largest class: a call in pieces cycles through two, so two
// such calls of a group (or a call and the next) stage without allocating.
constexpr size_t kLargestClassCount = 4;

// How long a call that finds no free staging block waits for the
// communicator's earlier device work to return one before it allocates.
constexpr auto kGrowWait = std::chrono::seconds(1);

// How long aborted device work may take to end before its memory is leaked.
constexpr auto kAbortGrace = std::chrono::seconds(2);

// A graph destroyed just before its communicator releases its captured jobs
// on a CUDA thread a moment later; destruction waits that long for it, not for
// graphs that outlive the communicator.
constexpr auto kGraphReleaseWait = std::chrono::milliseconds(200);

// Spin, then yield, then sleep: a stream may take long to reach the call.
void backoff(int polls) {
  if (polls < 1000) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// Device-resident PreMulSum scalars reach pinned memory with the inputs
// (stageIn); once the job's events are done they are values.
void takeStagedScalars(std::vector<engine::Task>* tasks) {
  for (engine::Task& t : *tasks)
    if (t.deviceScalar) {
      std::memcpy(t.op.scalar, t.deviceScalar, reduce::typeSize(t.type));
      t.deviceScalar = nullptr;
    }
}

// Unknown peers (none gathered): assumed, as the arena was made before.
bool hasRankInThisProcess(const ncclComm& comm) {
  if (comm.rank < 0 || size_t(comm.rank) >= comm.peers.size()) return true;
  const PeerInfo& me = comm.peers[size_t(comm.rank)];
  for (const PeerInfo& p : comm.peers)
    if (p.rank != me.rank && sameProcess(p, me)) return true;
  return false;
}

// The host function of a captured job: each launch of its graph submits the
// job again. Runs on a CUDA thread, after the copies of the contributions.
void CUDART_CB launchCaptured(void* data) {
  auto* job = static_cast<CapturedJob*>(data);
  job->port->submit(*job);
}

// The destructor of the graph's reference (a CUDA user object): no CUDA call,
// no lock; the proxy frees the memory at its next reclaim.
void CUDART_CB releaseCaptured(void* data) {
  std::unique_ptr<std::shared_ptr<CapturedJob>> ref(static_cast<std::shared_ptr<CapturedJob>*>(data));
  (*ref)->released.store(true);
}

}  // namespace

void LaunchPort::submit(CapturedJob& job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (proxy_) proxy_->submitLaunch(job);
}

void LaunchPort::pumpUntil(std::function<bool()> ended) {
  std::lock_guard<std::mutex> lock(mu_);  // the proxy closes the port before its pump goes
  if (proxy_ == nullptr) return;
  if (lanes::BridgePump* pump = proxy_->madeBridgePump()) pump->add(std::move(ended));
}

bool LaunchPort::open() {
  std::lock_guard<std::mutex> lock(mu_);
  return proxy_ != nullptr;
}

void LaunchPort::close() {
  std::lock_guard<std::mutex> lock(mu_);
  proxy_ = nullptr;
}

CudaEvent::~CudaEvent() {
  if (event_) cudaEventDestroy(event_);
}

CudaEvent& CudaEvent::operator=(CudaEvent&& o) noexcept {
  if (this != &o) {
    if (event_) cudaEventDestroy(event_);
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}

Result CudaEvent::record(cudaStream_t stream) {
  if (!event_) BRAID_CUDA_TRY(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  BRAID_CUDA_TRY(cudaEventRecord(event_, stream));
  return Result::success();
}

PooledEvent::~PooledEvent() {
  const std::shared_ptr<Free> home = home_.lock();
  if (!home) return;
  std::lock_guard<std::mutex> lock(home->mu);
  home->events.push_back(std::move(event_));
}

Result EventPool::record(cudaStream_t stream, SharedEvent* out) {
  CudaEvent event;
  {
    std::lock_guard<std::mutex> lock(free_->mu);
    if (!free_->events.empty()) {
      event = std::move(free_->events.back());
      free_->events.pop_back();
    }
  }
  BRAID_TRY(event.record(stream));
  *out = std::make_shared<const PooledEvent>(std::move(event), free_);
  return Result::success();
}

DeviceProxy::DeviceProxy(ncclComm* comm, int device)
    : comm_(comm), device_(device), port_(std::make_shared<LaunchPort>(this)),
      launchCache_(std::make_unique<LaunchCache>()) {}

Result DeviceProxy::start() {
  DeviceGuard guard(device_);
  BRAID_TRY(guard.status());
  BRAID_TRY(words_.allocate());
  BRAID_TRY(beacons_.allocate(comm_->settings.laneBeacons));
  BRAID_TRY(tickets_.reserve());  // the tickets of staged groups CUDA graphs capture
  // The kernels' code, before any launch can load it behind a spinning kernel.
  BRAID_TRY(kernels::loadStreamWaitKernels());
  BRAID_TRY(kernels::loadMarkLaunchKernel());
  BRAID_TRY(executor::loadPlanKernel());
  BRAID_TRY(executor::queryPlanDevice(kThreadsPerLane, &planDevice_));
  // Before any launch of this communicator (its first device calls are
  // planned in one group with its peers'), the blocks common calls need.
  BRAID_TRY(pool_.reserve(1, kSmallClassMax, kSmallPerClass));
  BRAID_TRY(pool_.reserve(kSmallClassMax * 2, kLargeClassMax / 2, kLargePerClass));
  BRAID_TRY(pool_.reserve(kLargeClassMax, kLargeClassMax, kLargestClassCount));
  if (comm_->settings.deviceKernels && comm_->timeSlicedGpu.empty()) {
    std::unique_ptr<lanes::LaneMemory> memory;
    // The arena holds FIFOs with ranks of this process only (others' are
    // shared by CUDA IPC, one allocation each): a rank alone in its process
    // makes none.
    const size_t arena = hasRankInThisProcess(*comm_) ? comm_->settings.deviceFifoArenaBytes : 0;
    // FIFOs with other hosts are bridged through mapped pinned memory
    // (BRAID_MULTIHOST_ENGINE=kernels): a reserve of the same size where
    // some rank is on another host.
    const size_t bridged = comm_->settings.bridgedKernels && !lanes::PortTable::reachable(comm_)
                               ? comm_->settings.deviceFifoArenaBytes
                               : 0;
    BRAID_TRY(makeReservedCudaLaneMemory(device_, arena, bridged, &memory));
    lanePorts_ = std::make_unique<lanes::PortTable>(std::move(memory));
    BRAID_TRY(launchCache_->start());
  }
  thread_ = std::thread([this] { loop(); });
  return Result::success();
}

// The caller (DeviceProxyDeleter) has made this thread's capture mode relaxed,
// for the frees of the members too.
DeviceProxy::~DeviceProxy() {
  port_->close();  // graph launches from now on submit nothing
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  DeviceGuard guard(device_);
  const bool streamsDone = waitInflight();
  // What the kernels posted to other hosts leaves now, unless aborted.
  if (bridgePump_ && words_.aborted()) bridgePump_->drop();
  bridgePump_.reset();
  if (streamsDone) launchCache_->release();  // else a kernel may still use its blocks
  std::lock_guard<std::mutex> lock(inflightMu_);
  // Every launch that was submitted has run: only graphs that still exist keep
  // their jobs.
  const auto until = std::chrono::steady_clock::now() + kGraphReleaseWait;
  for (int polls = 0;; ++polls) {
    reclaimCapturedLocked();
    if (captured_.empty() || std::chrono::steady_clock::now() > until) break;
    backoff(polls);
  }
  const bool graphsDone = captured_.empty();
  if (streamsDone && graphsDone) return;
  // A plan kernel may still use the lanes' FIFOs and Ports (a graph's too).
  if (!streamsDone || !graphsDone) {
    (void)lanePorts_.release();
    beacons_.leak();
  }
  // A stream has not reached the copies back (or never will), or a graph may
  // still run: what they may touch is leaked, not freed. A launch after this
  // finds its ticket word at the last value published (or 0) and the abort
  // word set, so its stream passes (with undefined results) instead of hanging.
  if (!graphsDone) words_.setAbort();
  words_.leak();
  for (const InflightJob& job : inflight_)
    if (!finished(job))
      for (const PinnedBlock& b : job.blocks) pool_.abandon(b);
  if (graphsDone) return;
  tickets_.leak();
  // A launch of one of the graphs may still be ending (its lanes saw the
  // abort word): no free of the reserve may wait for it, nor end under it.
  pool_.leakAll();
  size_t bytes = 0, deviceBytes = 0;
  for (const auto& job : captured_) {
    if (job->lanes && job->lanes->owner != this) continue;  // the owner's to count
    for (const PinnedBlock& b : job->blocks) {
      pool_.leak(b);
      bytes += b.bytes;
    }
    if (job->lanes) deviceBytes += job->lanes->blockBytes;
  }
  BRAID_WARN("rank %d: %zu CUDA graph capture(s) of device calls on this communicator still exist at its "
             "destruction; their %zu bytes of pinned staging memory and %zu bytes of device memory, and this "
             "communicator's pinned staging reserve, are leaked "
             "(destroy the graphs and their executable graphs first; launching them after the communicator is "
             "undefined)", comm_->rank, captured_.size(), bytes, deviceBytes);
}

uint64_t DeviceProxy::submit(DeviceJob&& job) {
  uint64_t waitValue = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job.waitValue = waitValue = ++lastWaitValue_;
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return waitValue;
}

void DeviceProxy::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && launches_.empty() && !busy_; });
}

lanes::PortTable& DeviceProxy::lanePorts() {
  if (!lanePorts_) lanePorts_ = std::make_unique<lanes::PortTable>(makeCudaLaneMemory(device_));
  return *lanePorts_;
}

lanes::BridgePump* DeviceProxy::bridgePump() {
  if (!bridgePump_ && lanePorts_ && lanePorts_->bridge())
    bridgePump_ = std::make_unique<lanes::BridgePump>(lanePorts_->bridge());
  return bridgePump_.get();
}

Result DeviceProxy::orderLaneKernel(cudaStream_t stream) {
  if (laneKernelDone_ && stream != laneStream_) BRAID_CUDA_TRY(cudaStreamWaitEvent(stream, laneKernelDone_->get(), 0));
  return Result::success();
}

void DeviceProxy::noteLaneKernel(cudaStream_t stream, SharedEvent done) {
  laneKernelDone_ = std::move(done);
  laneStream_ = stream;
}

void DeviceProxy::pause() {
  std::unique_lock<std::mutex> lock(mu_);
  paused_ = true;
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void DeviceProxy::resume() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    paused_ = false;
  }
  cv_.notify_all();
}

Result DeviceProxy::adoptCaptured(const std::shared_ptr<CapturedJob>& job, cudaGraph_t graph) {
  MappedSlot slot;
  const Result r = job->lanes ? Result::success() : tickets_.acquire(&slot);  // a plan kernel waits for no ticket
  job->ticket = slot;
  job->port = port_;
  if (!r.ok()) job->released.store(true);  // no graph has it: reclaimed at once
  {
    std::lock_guard<std::mutex> lock(inflightMu_);
    captured_.push_back(job);
  }
  BRAID_TRY(r);
  // On failure giveToGraph has released (or will release) the reference itself.
  auto ref = std::make_unique<std::shared_ptr<CapturedJob>>(job);
  return giveToGraph(graph, ref.release(), &releaseCaptured);
}

void DeviceProxy::shareCaptured(const std::shared_ptr<CapturedJob>& job) {
  std::lock_guard<std::mutex> lock(inflightMu_);
  captured_.push_back(job);
}

Result DeviceProxy::enqueueLaunch(CapturedJob* job, cudaStream_t stream) {
  BRAID_CUDA_TRY(cudaLaunchHostFunc(stream, &launchCaptured, job));
  return Result::success();
}

// The ticket reaches the job's word before the host function returns, so
// before the launch's stream-wait kernel starts. The job is queued before the
// ticket is taken, so an allocation failure leaves no ticket unpublished.
// That kernel counts as outstanding from here until its ticket is published
// (base/cuda_quiet_free.h): braid does not see the graph's launch itself, and
// after the publication the kernel waits for nothing of the host's.
void DeviceProxy::submitLaunch(CapturedJob& captured) noexcept {
  try {
    DeviceJob job;
    job.sequence = captured.sequence;
    job.captured = true;
    job.staged = captured.staged;
    job.run = captured.run;
    {
      std::lock_guard<std::mutex> lock(mu_);
      job.ticket = lastTicket_ + 1;
      launches_.push_back(std::move(job));
      lastTicket_ = launches_.back().ticket;
      addOutstandingKernels(1);
      __atomic_store_n(captured.ticket.host, lastTicket_, __ATOMIC_SEQ_CST);
      captured.lastTicket.store(lastTicket_);
    }
    cv_.notify_all();
  } catch (...) {
    // This launch's kernel reads the previous ticket and passes; the failure
    // reaches ncclCommGetAsyncError through the proxy thread.
    lostLaunch_.store(true);
    cv_.notify_all();
  }
}

Result DeviceProxy::stagingBlock(size_t bytes, PinnedBlock* out) {
  if (pool_.take(bytes, out)) return Result::success();
  const auto until = std::chrono::steady_clock::now() + kGrowWait;
  for (int polls = 0;; ++polls) {
    reclaim();
    if (pool_.take(bytes, out)) return Result::success();
    bool busy = false;
    {
      std::lock_guard<std::mutex> lock(inflightMu_);
      busy = !inflight_.empty();
    }
    if (!busy || std::chrono::steady_clock::now() > until) break;
    backoff(polls);
  }
  if (!grewPool_.exchange(true))
    BRAID_INFO(kLogInit, "rank %d: device calls need more pinned staging memory than the reserve (blocks of "
               "up to %zu bytes): allocating (cudaHostAlloc may wait for the device's running kernels)",
               comm_->rank, kLargeClassMax);
  return pool_.grow(bytes, out);
}

void DeviceProxy::addInflight(InflightJob&& job) {
  std::lock_guard<std::mutex> lock(inflightMu_);
  inflight_.push_back(std::move(job));
  addOutstandingKernels(1);
}

bool DeviceProxy::finished(const InflightJob& job) const {
  for (const SharedEvent& e : job.done) {
    const cudaError_t err = cudaEventQuery(e->get());
    if (err == cudaSuccess) continue;
    cudaGetLastError();  // NotReady is recorded as this thread's last error too
    return false;
  }
  return true;
}

void DeviceProxy::reclaim() {
  if (reclaimInflight()) freeDeferredIfQuiet();
}

bool DeviceProxy::reclaimInflight() {
  std::lock_guard<std::mutex> lock(inflightMu_);
  size_t kept = 0;
  for (size_t i = 0; i < inflight_.size(); ++i) {
    if (finished(inflight_[i])) {
      for (const PinnedBlock& b : inflight_[i].blocks) pool_.release(b);
      addOutstandingKernels(-1);
      continue;
    }
    if (kept != i) inflight_[kept] = std::move(inflight_[i]);
    ++kept;
  }
  inflight_.resize(kept);
  reclaimCapturedLocked();
  return kept == 0;
}

// A released graph has no launch left running, but after an abort its last
// launch's stream may have passed while the host work still uses the blocks:
// they return once that work published its ticket.
void DeviceProxy::reclaimCapturedLocked() {
  const uint64_t published = words_.launchPublished();
  size_t kept = 0;
  for (size_t i = 0; i < captured_.size(); ++i) {
    CapturedJob& job = *captured_[i];
    if (job.released.load() && job.lastTicket.load() <= published) {
      if (job.lanes && job.lanes->owner != this) {  // shared: the owner frees
        captured_[i].reset();
        continue;
      }
      if (job.lanes) {  // its beacons go with the job, which its watch keeps
        if (job.lanes->block && !launchCache_->freeAllocated(job.lanes->block))
          freeDeviceWhenQuiet(job.lanes->block, device_);
        job.lanes->block = nullptr;
      }
      for (const PinnedBlock& b : job.blocks) pool_.release(b);
      tickets_.release(job.ticket);
      captured_[i].reset();
      continue;
    }
    if (kept != i) captured_[kept] = std::move(captured_[i]);
    ++kept;
  }
  captured_.resize(kept);
}

bool DeviceProxy::waitInflightFor(std::chrono::milliseconds wait) {
  const auto until = std::chrono::steady_clock::now() + wait;
  for (int polls = 0;; ++polls) {
    reclaim();
    {
      std::lock_guard<std::mutex> lock(inflightMu_);
      if (inflight_.empty()) return true;
    }
    if (std::chrono::steady_clock::now() > until) return false;
    backoff(polls);
  }
}

bool DeviceProxy::waitInflight() {
  if (waitInflightFor(kReleaseWait)) return true;
  // A kernel that still runs may wait for a peer that never comes: the abort
  // word ends it (and a stream-wait kernel), rather than the memory it uses
  // being freed under it or leaked.
  words_.setAbort();
  if (waitInflightFor(kAbortGrace)) {
    BRAID_WARN("rank %d: device work of earlier calls was still running %lld s after the communicator's "
               "destruction began; it was aborted (its results are undefined)",
               comm_->rank, static_cast<long long>(kReleaseWait.count()));
    return true;
  }
  BRAID_WARN("rank %d: device work of earlier calls did not complete within %lld s of the "
             "communicator's destruction, nor end when aborted; its memory is leaked, and so is that of "
             "communicators destroyed later in this process (no free may run while a kernel may wait)",
             comm_->rank, static_cast<long long>(kReleaseWait.count()));
  return false;
}

void DeviceProxy::loop() {
  // The proxy's CUDA calls (event queries) go to the communicator's device,
  // never create a context on device 0, and are safe for any thread's graph
  // capture (the events were recorded outside captures).
  if (cudaSetDevice(device_) != cudaSuccess) cudaGetLastError();
  relaxCaptureModeOfThisThread();
  for (DeviceJob job; next(&job);) {
    runJob(job);
    job = DeviceJob();
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
    }
    cv_.notify_all();
  }
}

// A graph launch first: its contributions are in pinned memory when it
// arrives, while a call issued outside graphs may be waiting behind a launch on
// its stream (issued after the launch, it is submitted first).
bool DeviceProxy::next(DeviceJob* job) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return (!paused_ && !launches_.empty()) || !queue_.empty() || stop_; });
  std::deque<DeviceJob>& from = paused_ || launches_.empty() ? queue_ : launches_;
  if (from.empty()) return false;  // stopped, nothing queued
  *job = std::move(from.front());
  from.pop_front();
  busy_ = true;
  return true;
}

// While a call issued outside graphs waits for its stream, launches that
// arrive run: the stream may be held by one of them.
void DeviceProxy::runArrivedLaunches() {
  for (;;) {
    DeviceJob launch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (paused_ || launches_.empty()) return;
      launch = std::move(launches_.front());
      launches_.pop_front();
    }
    runJob(launch);
  }
}

Result DeviceProxy::skipReason() const {
  if (failed_ || comm_->abortFlag.load(std::memory_order_relaxed) != 0)
    return fail(ncclSystemError, "skipped: the communicator failed or was aborted before this device call ran");
  if (lostLaunch_.load())
    return fail(ncclSystemError, "a launch of a CUDA graph could not queue its device call (out of host memory)");
  return Result::success();
}

Result DeviceProxy::waitReady(DeviceJob& job) {
  for (CudaEvent& e : job.ready) {
    for (int polls = 0;; ++polls) {
      const cudaError_t err = cudaEventQuery(e.get());
      if (err == cudaSuccess) break;
      cudaGetLastError();  // NotReady is recorded as this thread's last error too
      if (err != cudaErrorNotReady) {
        return cudaFailure("cudaEventQuery (copy of a contribution to pinned memory)", err);
      }
      if (comm_->abortFlag.load(std::memory_order_relaxed) != 0)
        return fail(ncclSystemError, "the communicator was aborted while its device call waited for its stream");
      runArrivedLaunches();
      backoff(polls);
    }
  }
  return Result::success();
}

// A failed job still publishes its sequence (or ticket), so the user's streams
// go on (with undefined results) and ncclCommGetAsyncError reports the failure.
void DeviceProxy::runJob(DeviceJob& job) {
  Result r = skipReason();
  if (r.ok() && !job.captured) r = waitReady(job);
  if (r.ok()) r = skipReason();  // a launch that ran meanwhile may have failed
  if (r.ok()) {
    takeStagedScalars(&job.staged);
    r = job.run(job.staged);
  }
  if (!r.ok() && !failed_) {
    BRAID_WARN("rank %d: device call #%llu%s failed: %s", comm_->rank,
               static_cast<unsigned long long>(job.sequence),
               job.captured ? " (a launch of the CUDA graph that captured it)" : "", r.message().c_str());
    engine::setCommError(comm_, r);
    failed_ = true;
  }
  if (job.captured) {
    words_.publishLaunch(job.ticket);
    addOutstandingKernels(-1);  // counted when the launch submitted it
  } else {
    words_.publish(job.waitValue);
  }
  job.ready.clear();  // after the publication: a CUDA call may wait behind a blocking launch
}

}  // namespace braid::device
