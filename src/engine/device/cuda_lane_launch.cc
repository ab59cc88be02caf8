#include "engine/device/cuda_lane_launch.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "base/cuda_quiet_free.h"
#include "base/cuda_util.h"
#include "base/log.h"
#include "engine/comm.h"
#include "engine/connect.h"
#include "engine/device/cuda_capture.h"
#include "engine/device/cuda_device_path.h"
#include "engine/device/cuda_lane_capture.h"
#include "engine/device/cuda_lane_image.h"
#include "engine/device/launch_plan.h"
#include "engine/lanes/peer_access.h"
#include "kernels/executor/plan_kernel.h"

namespace braid::device {

namespace {

// Each communicator's launch is kept per shape and peer access, except under
// NCCL_DEBUG_SUBSYS=TUNING (each call logs its choice).
bool cacheable() { return !logEnabled(LogLevel::Info, kLogTuning); }

Result planCalls(bool cache, CommLaunch* c) {
  LaunchCache& launches = c->proxy->launchCache();
  const bool peerAccess = !c->peerRanks.empty();
  if (cache && (c->cached = launches.find(c->stream, peerAccess, c->tasks)) != nullptr) return Result::success();
  BRAID_TRY(lanes::commProgramOf(c->tasks, lanes::LaneRunner::Device, &c->planned, peerAccess));
  if (!cache) return Result::success();
  auto entry = std::make_unique<CachedLaunch>();
  entry->stream = c->stream;
  entry->peerAccess = peerAccess;
  entry->cp = std::move(c->planned);
  c->cached = launches.insert(c->tasks, std::move(entry));
  return Result::success();
}

// Its device, proxy and calls; they are planned once the group's peer
// access is known.
Result prepare(const std::vector<engine::Task>& tasks, const std::vector<size_t>& mine, CommLaunch* c) {
  int device = -1;
  BRAID_TRY(deviceOfCalls(tasks, mine, &device));
  if (device < 0) device = c->comm->deviceProxy ? c->comm->deviceProxy->device() : -1;
  if (device < 0) BRAID_CUDA_TRY(cudaGetDevice(&device));
  BRAID_TRY(proxyFor(c->comm, device, &c->proxy));
  c->stream = tasks[mine.front()].stream;
  for (size_t i : mine) {
    if (tasks[i].stream != c->stream)
      return fail(ncclInvalidUsage, "rank %d: with BRAID_DEVICE_ENGINE=kernels a communicator's device calls in one "
                  "group must be on one stream", c->comm->rank);
    c->tasks.push_back(&tasks[i]);
  }
  return Result::success();
}

// Which calls may address each other's buffers: ranks of one communicator in
// this group on one device (so in one launch).
void findPeerAccess(std::vector<CommLaunch>& comms) {
  std::vector<const engine::Task*> all;
  std::map<const ncclComm*, int> deviceOf;
  for (const CommLaunch& c : comms) {
    all.insert(all.end(), c.tasks.begin(), c.tasks.end());
    deviceOf[c.comm] = c.proxy->device();
  }
  const lanes::PeerAccessGroups groups = lanes::peerAccessGroups(
      all, [&](const engine::Task& a, const engine::Task& b) { return deviceOf.at(a.comm) == deviceOf.at(b.comm); });
  for (CommLaunch& c : comms)
    if (const auto it = groups.find(c.comm); it != groups.end()) c.peerRanks = it->second;
}

// Makes the FIFOs: every communicator offers before any accepts, as one
// thread may drive every rank (ncclCommInitAll); then the connections of
// FIFOs with ranks on other hosts, for every communicator at once, and
// those FIFOs (bridged: lanes/port_table.h).
Result connect(std::vector<CommLaunch>& comms) {
  for (CommLaunch& c : comms) {
    if (!c.needsConnect()) continue;
    DeviceGuard guard(c.proxy->device());
    BRAID_TRY(guard.status());
    BRAID_TRY(c.proxy->lanePorts().offer(c.comm, lanes::portsOf(*c.cp().program), lanes::limitsOf(c.comm)));
  }
  std::vector<engine::ConnectionNeed> needs;
  for (CommLaunch& c : comms) {
    if (!c.needsConnect()) continue;
    DeviceGuard guard(c.proxy->device());
    BRAID_TRY(guard.status());
    BRAID_TRY(c.proxy->lanePorts().accept(c.comm, lanes::portsOf(*c.cp().program), lanes::limitsOf(c.comm)));
    const auto more = c.proxy->lanePorts().bridgeNeeds(c.comm, lanes::portsOf(*c.cp().program));
    needs.insert(needs.end(), more.begin(), more.end());
  }
  if (!needs.empty()) BRAID_TRY(engine::connectAll(needs));
  for (CommLaunch& c : comms) {
    if (!c.needsConnect()) continue;
    DeviceGuard guard(c.proxy->device());
    BRAID_TRY(guard.status());
    BRAID_TRY(c.proxy->lanePorts().attachBridged(c.comm, lanes::portsOf(*c.cp().program), lanes::limitsOf(c.comm)));
    if (c.cached) c.cached->connected = true;
  }
  return Result::success();
}

// A launch's end as the bridge pumps of its communicators see it
// (lanes/bridge_pump.h): running until its end event is recorded and
// reached; ended at once if it never launched.
class LaunchEnd {
 public:
  void settle(SharedEvent done) {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = std::move(done);
    settled_ = true;
  }
  bool ended() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!settled_) return false;
    if (!done_) return true;
    const cudaError_t err = cudaEventQuery(done_->get());
    if (err == cudaErrorNotReady) return false;
    if (err != cudaSuccess) cudaGetLastError();  // the launch's own checks report it
    return true;
  }

 private:
  std::mutex mu_;
  SharedEvent done_;
  bool settled_ = false;
};

// Has the group's bridges pumped from now until the launch ends.
std::shared_ptr<LaunchEnd> pumpBridges(const std::vector<CommLaunch*>& group) {
  std::shared_ptr<LaunchEnd> end;
  for (const CommLaunch* c : group) {
    lanes::BridgePump* pump = c->proxy->bridgePump();
    if (pump == nullptr) continue;
    if (!end) end = std::make_shared<LaunchEnd>();
    pump->add([end] { return end->ended(); });
  }
  return end;
}

// After an unwatched kernel (no beacons were free): the worst status a lane of
// the launch ended with (the first communicator's shared failure word, reset
// here), reported to every communicator of the launch: their lanes ran
// together, and one failing ended the others. A watched launch has a failure
// word of its own among its beacons and the watch reports its failures
// (naming the lane, step and peer, and telling the other ranks): no host
// function runs after it.
struct FailureCheck {
  DeviceProxy* wordOwner = nullptr;
  std::vector<ncclComm*> comms;
};

void CUDART_CB checkFailures(void* arg) {
  std::unique_ptr<FailureCheck> check(static_cast<FailureCheck*>(arg));
  const uint32_t worst = check->wordOwner->words().takeLaneFailure();
  if (worst == 0) return;
  for (ncclComm* comm : check->comms) {
    const executor::ExecStatus st = executor::ExecStatus(worst);
    // A message of another call (its fingerprint) or size: the ranks' calls differ.
    const bool misuse = st == executor::ExecStatus::FingerprintMismatch || st == executor::ExecStatus::SizeMismatch;
    engine::setCommError(comm,
                         fail(misuse ? ncclInvalidUsage : ncclSystemError,
                              "rank %d: a plan kernel lane ended with '%s'%s (BRAID_DEVICE_ENGINE=kernels)", comm->rank,
                              executor::execStatusName(st), misuse ? ": the ranks called different operations" : ""));
  }
}

// The launch's watchdog, on the first communicator's watch thread.
void watchLaunch(const std::vector<CommLaunch*>& group, const std::shared_ptr<BeaconLease>& beacons) {
  group.front()->proxy->watch().add(watchOf(watchedLaunchOf(group, *beacons), beacons));
}

// One kernel for every communicator of the group on one device
// (launch_plan.h): the lanes image and the scratch in one stream-ordered
// device block, on the first communicator's stream, the others joined.
Result launchOnDevice(const Launch& launch, const std::vector<CommLaunch*>& group) {
  const auto quiet = holdQuietFrees();  // the kernel is counted before any free may run
  DeviceProxy* first = group.front()->proxy;
  const cudaStream_t stream = static_cast<cudaStream_t>(const_cast<void*>(launch.stream));
  DeviceGuard guard(first->device());
  BRAID_TRY(guard.status());
  BRAID_TRY(joinStreams(first->events(), stream, launch.joined));
  ImageOfLaunch im = imageOf(group);
  for (const CommLaunch* c : group) BRAID_TRY(c->proxy->orderLaneKernel(stream));
  // A watched launch's beacons are returned after the kernel and its watch
  // (BeaconLease).
  std::shared_ptr<BeaconLease> beacons;
  if (!first->beacons().take(im.nlanes + 1, &beacons)) {
    if (first->beacons().firstShortage())
      BRAID_WARN("rank %d: plan kernel launches in flight hold the lane beacons (%zu, BRAID_LANE_BEACONS): this "
                 "launch (%u lanes), and any later one that finds too few free, runs unwatched (no BRAID_TIMEOUT, "
                 "no lost-peer detection); said once per communicator",
                 group.front()->comm->rank, first->beacons().capacity(), im.nlanes);
    else
      BRAID_INFO(kLogColl, "rank %d: a launch of %u lanes runs unwatched (no lane beacons free)",
                 group.front()->comm->rank, im.nlanes);
  }
  setBeacons(first, beacons.get(), &im);
  // The first communicator's kept launch lends its block, reused in stream
  // order (the launch is on its stream); else one for this launch. The image
  // it carried last, if written for these parts, is only refreshed.
  CachedLaunch* kept = group.front()->cached;
  if (kept && kept->stream != stream) kept = nullptr;
  const KeptImage* reuse = kept ? keptImageFor(group, kept) : nullptr;
  const bool refresh = reuse != nullptr;
  if (refresh) sizeFromKept(*reuse, &im);
  else sizeImage(group, &im);
  char* block = nullptr;
  unsigned long long streamId = 0;
  if (kept) {
    BRAID_TRY(first->launchCache().blockFor(kept, im.blockBytes()));
    block = kept->block;
    // Its last launch was on this stream handle, but the stream may have been
    // destroyed and the handle reused since: then this launch waits for that
    // one. A stream's id is never reused; on the same stream, stream order
    // suffices, and a wait would cost the call a driver call.
#if CUDART_VERSION >= 12000
    BRAID_CUDA_TRY(cudaStreamGetId(stream, &streamId));
#endif
    if (kept->done && (streamId == 0 || kept->doneStream != streamId))
      BRAID_CUDA_TRY(cudaStreamWaitEvent(stream, kept->done->get(), 0));
  } else {
    BRAID_CUDA_TRY(cudaMallocAsync(reinterpret_cast<void**>(&block), im.blockBytes(), stream));
  }
  // A kept block's launch carries a small image in its parameters: no copy
  // before the kernel, no staging block (launch_image.h); else it is uploaded.
  const bool carry = kept && carriesImage(group, im);
  executor::LaunchImage* carried = nullptr;
  PinnedBlock staging;
  InflightJob inflight;
  Result r;
  if (carry) {
    // blockFor drops the kept image with a block it replaces.
    if (refresh && kept->image != nullptr && kept->image->block == block) refreshImage(group, kept->image.get(), &im);
    else r = keepImage(group, kept, &im);
    if (r.ok()) {
      carried = &kept->image->carried;
      carried->words = uint32_t(im.layout.written / sizeof(uint64_t));
      carried->gate = kept->gate;
      carried->generation = ++kept->generation;
    }
  } else {
    BRAID_TRY(first->stagingBlock(im.layout.written, &staging));
    inflight.blocks.push_back(staging);
    r = writeImage(group, block, staging.data, &im);
    if (r.ok()) r = uploadImage(group, block, staging, im, stream);
  }
  // Under CUDA_LAUNCH_BLOCKING=1 the launch returns only once the kernel has
  // ended: its watch (BRAID_TIMEOUT, a lost peer) must be on before, or a
  // lane waiting for a peer that never comes would hold the launch for ever.
  // A watch whose kernel never starts stays idle until the communicator goes.
  const bool watchFirst = r.ok() && beacons && first->comm()->settings.launchesBlock;
  if (watchFirst) watchLaunch(group, beacons);
  // Messages with other hosts move while the kernel runs (and, under
  // CUDA_LAUNCH_BLOCKING=1, while its launch blocks).
  const std::shared_ptr<LaunchEnd> bridged = r.ok() ? pumpBridges(group) : nullptr;
  if (r.ok())
    r = executor::launchPlanLanes(first->planDevice(), reinterpret_cast<executor::LaneExec*>(block), im.nlanes,
                                  kThreadsPerLane, nullptr, im.anyFp8, stream, carried);
  // Freed in stream order, after the kernel (or at once if it never launched).
  if (!kept && cudaFreeAsync(block, stream) != cudaSuccess && r.ok())
    r = cudaFailure("cudaFreeAsync", cudaGetLastError());
  if (r.ok() && !beacons) {
    auto check = std::make_unique<FailureCheck>();
    check->wordOwner = first;
    for (const CommLaunch* c : group) check->comms.push_back(c->comm);
    const cudaError_t err = cudaLaunchHostFunc(stream, &checkFailures, check.get());
    if (err == cudaSuccess) (void)check.release();  // the callback owns it
    else r = cudaFailure("cudaLaunchHostFunc", err);
  }
  // The launch's end, after its failure check (which reads the proxy: a proxy
  // outlives its inflight jobs), one event for all that wait on it: the kept
  // block's next use or free, each communicator's next kernel on another
  // stream, the joined streams, the staging block's return.
  SharedEvent done;
  const Result recorded = first->events().record(stream, &done);
  if (r.ok()) r = recorded;
  if (kept && done) {
    kept->done = done;
    kept->doneStream = streamId;
  }
  if (bridged) bridged->settle(done);  // no event: the launch failed first
  if (r.ok())
    for (const CommLaunch* c : group) c->proxy->noteLaneKernel(stream, done);
  if (r.ok()) r = releaseStreams(*done, launch.joined);
  if (r.ok() && beacons && !watchFirst) watchLaunch(group, beacons);
  inflight.beacons = beacons;
  if (done) {
    inflight.done.push_back(std::move(done));
    first->addInflight(std::move(inflight));
  } else if (!carry) {
    first->pool().abandon(staging);  // no event says when the copy is done
  }
  return r;
}

}  // namespace

Result launchDeviceLanes(const std::vector<engine::Task>& tasks) {
  CaptureModeRelaxed relaxed;
  std::vector<CommLaunch> comms;
  std::map<ncclComm*, std::vector<size_t>> byComm;
  for (size_t i = 0; i < tasks.size(); ++i) {
    auto [it, added] = byComm.try_emplace(tasks[i].comm);
    if (added) {
      comms.emplace_back();
      comms.back().comm = tasks[i].comm;
    }
    it->second.push_back(i);
  }
  const bool cache = cacheable();
  for (CommLaunch& c : comms) BRAID_TRY(prepare(tasks, byComm[c.comm], &c));
  findPeerAccess(comms);
  for (CommLaunch& c : comms) BRAID_TRY(planCalls(cache, &c));
  BRAID_TRY(connect(comms));
  std::vector<LaunchPart> parts;
  std::map<int, uint32_t> resident;                // lanes each device holds at once
  std::map<cudaStream_t, const CommLaunch*> onStream;  // a stream belongs to one device
  for (const CommLaunch& c : comms) {
    const CommLaunch*& other = onStream[c.stream];
    if (other && other->proxy->device() != c.proxy->device())
      return fail(ncclInvalidUsage, "ranks %d and %d share a stream but use different CUDA devices", other->comm->rank,
                  c.comm->rank);
    other = &c;
    parts.push_back({c.comm->rank, c.proxy->device(), c.stream, uint32_t(c.cp().program->lanes.size())});
    resident[c.proxy->device()] = c.proxy->residentPlanLanes();
  }
  std::vector<Launch> launches;
  BRAID_TRY(planLaunches(parts, [&](int device) { return resident[device]; }, &launches));
  // Lanes of one group on several devices are one launch per device: under
  // CUDA_LAUNCH_BLOCKING=1 the first would wait for ever for the others.
  if (launches.size() > 1 && comms.front().comm->settings.launchesBlock)
    return fail(ncclInvalidUsage, "rank %d: this group's device calls span %zu CUDA devices, whose plan kernels "
                "must run at once, but CUDA_LAUNCH_BLOCKING=1 makes each launch wait for its kernel to end: unset "
                "CUDA_LAUNCH_BLOCKING, or drive each device from its own thread", comms.front().comm->rank,
                launches.size());
  for (const Launch& launch : launches) {
    std::vector<CommLaunch*> group;
    for (size_t i : launch.parts) group.push_back(&comms[i]);
    // The launch is on its first communicator's stream, asked by classifyGroup.
    StreamCapture capture;
    BRAID_TRY(captureOf(*group.front()->tasks.front(), &capture));
    if (capture.active) {
      BRAID_TRY(captureOnDevice(launch, group, capture.graph));
      continue;
    }
    group.front()->proxy->reclaim();
    BRAID_TRY(launchOnDevice(launch, group));
  }
  return Result::success();
}

}  // namespace braid::device
