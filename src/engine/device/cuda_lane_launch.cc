#include "engine/device/cuda_lane_launch.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <memory>

#include "base/cuda_quiet_free.h"
#include "base/cuda_util.h"
#include "base/log.h"
#include "engine/comm.h"
#include "engine/device/cuda_capture.h"
#include "engine/device/cuda_device_path.h"
#include "engine/device/cuda_launch_cache.h"
#include "engine/device/launch_plan.h"
#include "engine/fingerprint.h"
#include "engine/lanes/beacon_watch.h"
#include "engine/lanes/comm_program.h"
#include "engine/lanes/lane_image.h"
#include "engine/lanes/peer_access.h"
#include "kernels/executor/plan_kernel.h"
#include "kernels/launch_mark.h"

namespace braid::device {

namespace {

constexpr uint32_t kThreadsPerLane = 256;

// One communicator's calls of the group.
struct CommLaunch {
  ncclComm* comm = nullptr;
  DeviceProxy* proxy = nullptr;
  cudaStream_t stream = nullptr;
  std::vector<const engine::Task*> tasks;
  lanes::CommProgram planned;      // planned for this launch only
  CachedLaunch* cached = nullptr;  // or kept per shape (cuda_launch_cache.h)
  // Its call addresses these ranks' buffers (lanes/peer_access.h), in rank
  // order, all in its launch; empty: it uses FIFOs.
  std::vector<ncclComm*> peerRanks;
  const lanes::CommProgram& cp() const { return cached ? cached->cp : planned; }
  // Its FIFOs may not all exist yet: connect() makes them.
  bool needsConnect() const { return cached == nullptr || !cached->connected; }
};

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
// thread may drive every rank (ncclCommInitAll).
Result connect(std::vector<CommLaunch>& comms) {
  for (CommLaunch& c : comms) {
    if (!c.needsConnect()) continue;
    DeviceGuard guard(c.proxy->device());
    BRAID_TRY(guard.status());
    BRAID_TRY(c.proxy->lanePorts().offer(c.comm, lanes::portsOf(c.cp().program), lanes::limitsOf(c.comm)));
  }
  for (CommLaunch& c : comms) {
    if (!c.needsConnect()) continue;
    DeviceGuard guard(c.proxy->device());
    BRAID_TRY(guard.status());
    BRAID_TRY(c.proxy->lanePorts().accept(c.comm, lanes::portsOf(c.cp().program), lanes::limitsOf(c.comm)));
    if (c.cached) c.cached->connected = true;
  }
  return Result::success();
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

size_t align(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The operations' buffers and reductions, scratch in the device block.
std::vector<executor::OpBuffers> opsOf(const CommLaunch& c, char* scratch) {
  std::vector<executor::OpBuffers> ops;
  for (size_t i = 0; i < c.tasks.size(); ++i)
    ops.push_back(lanes::opBuffersOf(*c.tasks[i], scratch + c.cp().scratchOffsets[i], c.cp().shapeFingerprints[i]));
  return ops;
}

// Sizes the peer table of each call that addresses its peers (its one
// call's), for the layout; fillPeerTables writes the addresses.
void addPeerTables(const std::vector<CommLaunch*>& group, std::vector<lanes::ImagePart>* parts) {
  for (size_t p = 0; p < group.size(); ++p)
    if (!group[p]->peerRanks.empty()) (*parts)[p].peerOps = {std::vector<uintptr_t>(group[p]->peerRanks.size())};
}

// Every peer's OpBuffers is in this launch's image at `block`.
void fillPeerTables(const std::vector<CommLaunch*>& group, uint64_t stage, uintptr_t block,
                    std::vector<lanes::ImagePart>* parts) {
  std::map<const ncclComm*, size_t> partOf;
  for (size_t p = 0; p < group.size(); ++p) partOf[group[p]->comm] = p;
  for (size_t p = 0; p < group.size(); ++p) {
    const std::vector<ncclComm*>& ranks = group[p]->peerRanks;
    for (size_t r = 0; r < ranks.size(); ++r)
      (*parts)[p].peerOps[0][r] = block + lanes::opBuffersOffset(*parts, stage, partOf.at(ranks[r]), 0);
  }
}

// Copies the image to the device block, then each device-resident PreMulSum
// scalar into its operation's RedOp: the kernel uses the value the stream had
// at this point, as NCCL's kernels read it when they run.
Result enqueueImage(char* block, const PinnedBlock& staging, size_t imageBytes,
                    const std::vector<lanes::ImagePart>& parts, uint64_t stage,
                    const std::vector<CommLaunch*>& group, cudaStream_t stream) {
  BRAID_CUDA_TRY(cudaMemcpyAsync(block, staging.data, imageBytes, cudaMemcpyHostToDevice, stream));
  for (size_t p = 0; p < group.size(); ++p)
    for (size_t i = 0; i < group[p]->tasks.size(); ++i) {
      const engine::Task& t = *group[p]->tasks[i];
      if (t.deviceScalar == nullptr) continue;
      char* scalar = block + lanes::opBuffersOffset(parts, stage, p, i) + offsetof(executor::OpBuffers, op) +
                     offsetof(reduce::RedOp, scalar);
      BRAID_CUDA_TRY(
          cudaMemcpyAsync(scalar, t.deviceScalar, reduce::typeSize(t.type), cudaMemcpyDeviceToDevice, stream));
    }
  return Result::success();
}

// The launch stream waits for the work already on each joined stream (each
// event is free again once the wait is enqueued).
Result joinStreams(EventPool& events, cudaStream_t stream, const std::vector<const void*>& joined) {
  for (const void* other : joined) {
    SharedEvent ready;
    BRAID_TRY(events.record(static_cast<cudaStream_t>(const_cast<void*>(other)), &ready));
    BRAID_CUDA_TRY(cudaStreamWaitEvent(stream, ready->get(), 0));
  }
  return Result::success();
}

// Each joined stream goes on only after the launch (`done`, its end).
Result releaseStreams(const PooledEvent& done, const std::vector<const void*>& joined) {
  for (const void* other : joined)
    BRAID_CUDA_TRY(cudaStreamWaitEvent(static_cast<cudaStream_t>(const_cast<void*>(other)), done.get(), 0));
  return Result::success();
}

// What a launch's watchdog (lanes/beacon_watch.h) is made from: each
// communicator's calls and lanes as the host planned them, and its beacons.
struct WatchedComm {
  ncclComm* comm = nullptr;
  lanes::PortTable* ports = nullptr;
  std::vector<engine::Task> tasks;
  lanes::LaneProgram program;  // a kept launch's stays for the next call: copied
  const executor::LaneBeacon* beacons = nullptr;
};

struct WatchedLaunch {
  std::vector<WatchedComm> comms;
  std::vector<DeviceProxy*> proxies;  // stopping the lanes raises every one's abort word
};

WatchedLaunch watchedLaunchOf(const std::vector<CommLaunch*>& group, const BeaconLease& beacons) {
  DeviceProxy* first = group.front()->proxy;
  WatchedLaunch w;
  size_t at = beacons.range().first;
  for (CommLaunch* c : group) {
    WatchedComm wc;
    wc.comm = c->comm;
    wc.ports = &c->proxy->lanePorts();
    for (const engine::Task* t : c->tasks) wc.tasks.push_back(*t);
    wc.program = c->cp().program;
    wc.beacons = static_cast<const executor::LaneBeacon*>(first->beacons().at(at));
    at += wc.program.lanes.size();
    w.comms.push_back(std::move(wc));
    w.proxies.push_back(c->proxy);
  }
  return w;
}

std::unique_ptr<lanes::BeaconWatch> watchOf(WatchedLaunch w, std::shared_ptr<const void> keep,
                                            lanes::WatchedReplay replay = {}) {
  auto watched = std::make_unique<lanes::LaneGroup>();
  for (WatchedComm& c : w.comms)
    lanes::watchLanes(watched.get(), c.comm, c.ports, std::move(c.tasks), std::move(c.program), c.beacons);
  std::vector<DeviceProxy*> proxies = std::move(w.proxies);
  return std::make_unique<lanes::BeaconWatch>(
      std::move(watched), [proxies] { for (DeviceProxy* p : proxies) p->abort(); }, std::move(keep),
      std::move(replay));
}

// The launch's watchdog, on the first communicator's watch thread.
void watchLaunch(const std::vector<CommLaunch*>& group, const std::shared_ptr<BeaconLease>& beacons) {
  group.front()->proxy->watch().add(watchOf(watchedLaunchOf(group, *beacons), beacons));
}

// The lanes image of a launch: each communicator's part, its LL staging
// size, and where the scratch starts in the device block.
struct ImageOfLaunch {
  std::vector<lanes::ImagePart> parts;
  uint64_t stage = 8;
  size_t scratchBytes = 0;
  bool anyFp8 = false;
  uint32_t nlanes = 0;
  size_t imageBytes = 0;  // known once the beacons and peer tables are set (sizeImage)
  size_t scratchAt = 0;
  size_t blockBytes() const { return scratchAt + scratchBytes; }
};

ImageOfLaunch imageOf(const std::vector<CommLaunch*>& group) {
  ImageOfLaunch im;
  for (const CommLaunch* c : group) {
    im.stage = std::max(im.stage, lanes::llStageBytesOf(c->comm));
    im.scratchBytes += align(c->cp().scratchBytes, 256);
    for (const engine::Task* t : c->tasks)
      im.anyFp8 = im.anyFp8 || t->type == ncclFloat8e4m3 || t->type == ncclFloat8e5m2;
  }
  im.parts.resize(group.size());
  for (size_t p = 0; p < group.size(); ++p) {
    const CommLaunch* c = group[p];
    lanes::PortTable* ports = &c->proxy->lanePorts();
    im.parts[p].program = &c->cp().program;
    im.parts[p].ops.resize(c->tasks.size());  // sized for the layout; filled by writeImage
    im.parts[p].portOf = [ports](const lanes::PortKey& k) { return ports->port(k); };
    im.parts[p].abortWord = const_cast<const uint32_t*>(c->proxy->words().deviceAbort());
    im.nlanes += uint32_t(im.parts[p].program->lanes.size());
  }
  return im;
}

// One failure word for the launch: a lane that fails ends every lane of it,
// whichever communicator it belongs to. A watched launch's is the beacon
// after its lanes' (zeroed when taken); an unwatched one's the first
// communicator's shared word.
void setBeacons(DeviceProxy* first, const BeaconLease* beacons, ImageOfLaunch* im) {
  uint32_t* failureWord = first->words().deviceLaneFailure();
  if (beacons) {
    const size_t from = beacons->range().first;
    for (size_t p = 0, at = from; p < im->parts.size(); at += im->parts[p].program->lanes.size(), ++p)
      im->parts[p].beacons = static_cast<executor::LaneBeacon*>(first->beacons().at(at));
    failureWord = static_cast<uint32_t*>(first->beacons().at(from + im->nlanes));
  }
  for (lanes::ImagePart& part : im->parts) part.failureWord = failureWord;
}

void sizeImage(const std::vector<CommLaunch*>& group, ImageOfLaunch* im) {
  addPeerTables(group, &im->parts);
  im->imageBytes = lanes::laneImageBytes(im->parts, im->stage);
  im->scratchAt = align(im->imageBytes, 256);
}

// Writes the image for `block` into `staging` and enqueues its copy there.
Result writeImage(const std::vector<CommLaunch*>& group, char* block, const PinnedBlock& staging, ImageOfLaunch* im,
                  cudaStream_t stream) {
  size_t scratchNext = im->scratchAt;
  for (size_t p = 0; p < group.size(); ++p) {
    im->parts[p].ops = opsOf(*group[p], block + scratchNext);
    scratchNext += align(group[p]->cp().scratchBytes, 256);
  }
  fillPeerTables(group, im->stage, reinterpret_cast<uintptr_t>(block), &im->parts);
  BRAID_TRY(lanes::writeLaneImage(im->parts, im->stage, reinterpret_cast<uintptr_t>(block), staging.data));
  return enqueueImage(block, staging, im->imageBytes, im->parts, im->stage, group, stream);
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
  sizeImage(group, &im);
  // The first communicator's kept launch lends its block, reused in stream
  // order (the launch is on its stream); else one for this launch.
  CachedLaunch* kept = group.front()->cached;
  if (kept && kept->stream != stream) kept = nullptr;
  char* block = nullptr;
  if (kept) {
    BRAID_TRY(first->launchCache().blockFor(kept, im.blockBytes()));
    block = kept->block;
    // Its last launch was on this stream handle; the stream may have been
    // destroyed and the handle reused since: wait for that launch anyway.
    if (kept->done) BRAID_CUDA_TRY(cudaStreamWaitEvent(stream, kept->done->get(), 0));
  } else {
    BRAID_CUDA_TRY(cudaMallocAsync(reinterpret_cast<void**>(&block), im.blockBytes(), stream));
  }
  PinnedBlock staging;
  BRAID_TRY(first->stagingBlock(im.imageBytes, &staging));
  InflightJob inflight;
  inflight.blocks.push_back(staging);
  Result r = writeImage(group, block, staging, &im, stream);
  // Under CUDA_LAUNCH_BLOCKING=1 the launch returns only once the kernel has
  // ended: its watch (BRAID_TIMEOUT, a lost peer) must be on before, or a
  // lane waiting for a peer that never comes would hold the launch for ever.
  // A watch whose kernel never starts stays idle until the communicator goes.
  const bool watchFirst = r.ok() && beacons && first->comm()->settings.launchesBlock;
  if (watchFirst) watchLaunch(group, beacons);
  if (r.ok())
    r = executor::launchPlanLanes(reinterpret_cast<executor::LaneExec*>(block), im.nlanes, kThreadsPerLane, nullptr,
                                  im.anyFp8, stream);
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
  if (kept && done) kept->done = done;
  if (r.ok())
    for (const CommLaunch* c : group) c->proxy->noteLaneKernel(stream, done);
  if (r.ok()) r = releaseStreams(*done, launch.joined);
  if (r.ok() && beacons && !watchFirst) watchLaunch(group, beacons);
  inflight.beacons = beacons;
  if (done) {
    inflight.done.push_back(std::move(done));
    first->addInflight(std::move(inflight));
  } else {
    first->pool().abandon(staging);  // no event says when the copy is done
  }
  return r;
}

// A watch saw a captured launch's kernel end (or stopped watching it): it is
// no longer counted outstanding.
void launchEnded(CapturedLanes& l) {
  if (l.running.exchange(false)) addOutstandingKernels(-1);
}

// Every launch of a captured plan-kernel launch's graph, watched from the
// first communicator's watch thread for as long as the graph exists: a new
// count (kernels/launch_mark.h) starts a watch of that launch, which ends
// unreported once a later launch is counted, and the kernel is counted
// outstanding (base/cuda_quiet_free.h) until a watch sees it end. A launch
// after one of the communicators is gone is not watched (undefined, as with
// NCCL; its lanes end on the abort word that destruction left raised).
class GraphLaunchWatch : public lanes::Watch {
 public:
  explicit GraphLaunchWatch(std::shared_ptr<CapturedJob> job) : job_(std::move(job)) {}
  ~GraphLaunchWatch() override { launchEnded(*job_->lanes); }

  bool poll() override {
    CapturedLanes& l = *job_->lanes;
    if (job_->released.load()) return false;  // no launch is left, nor will one come
    const uint64_t launch = __atomic_load_n(l.launchCount, __ATOMIC_ACQUIRE);
    if (launch != seen_) {
      seen_ = launch;
      current_.reset();
      if (communicatorsLive()) {
        if (!l.running.exchange(true)) addOutstandingKernels(1);
        current_ = l.watchOf(launch, job_);
      }
    }
    if (current_ && !current_->poll()) current_.reset();
    return true;
  }

 private:
  bool communicatorsLive() const {
    if (!job_->port->open()) return false;
    for (const auto& other : job_->otherPorts)
      if (!other->open()) return false;
    return true;
  }
  std::shared_ptr<CapturedJob> job_;
  uint64_t seen_ = 0;  // the launches counted when the watch last looked
  std::unique_ptr<lanes::BeaconWatch> current_;
};

// The job of a launch a CUDA graph captures: its image in pinned memory and
// its device block, both the graph's, its beacons (the lanes', the failure
// word's, the launch count's) for the graph's life, and how the watch of each
// launch of the graph is made. The first communicator's proxy adopts it (and
// frees its memory once the graph is gone); the others keep it too.
Result captureJob(const std::vector<CommLaunch*>& group, cudaGraph_t graph, ImageOfLaunch* im,
                  std::shared_ptr<CapturedJob>* out) {
  DeviceProxy* first = group.front()->proxy;
  std::shared_ptr<BeaconLease> beacons;
  if (!first->beacons().take(im->nlanes + 2, &beacons))
    return fail(ncclInternalError, "rank %d: a CUDA graph captures a plan kernel of %u lanes, but fewer than %u "
                "lane beacons are free (BRAID_LANE_BEACONS=%zu; a captured launch holds its beacons as long as its "
                "graph exists): raise BRAID_LANE_BEACONS, or destroy the graphs no longer used",
                group.front()->comm->rank, im->nlanes, im->nlanes + 2, first->beacons().capacity());
  setBeacons(first, beacons.get(), im);
  sizeImage(group, im);
  auto job = std::make_shared<CapturedJob>();
  job->lanes = std::make_unique<CapturedLanes>();
  CapturedLanes& l = *job->lanes;
  const size_t from = beacons->range().first;
  l.owner = first;
  l.beacons = beacons;
  l.firstBeacon = static_cast<executor::LaneBeacon*>(first->beacons().at(from));
  l.zeroedWords = uint32_t((im->nlanes + 1) * sizeof(executor::LaneBeacon) / sizeof(uint64_t));
  l.launchCount = static_cast<uint64_t*>(first->beacons().at(from + im->nlanes + 1));
  const uint64_t* count = l.launchCount;
  CapturedLanes* state = &l;  // lives as long as the job, which every watch keeps
  l.watchOf = [state, count, w = watchedLaunchOf(group, *beacons)](uint64_t launch, std::shared_ptr<const void> keep) {
    lanes::WatchedReplay r;
    r.current = [count, launch] { return __atomic_load_n(count, __ATOMIC_ACQUIRE) == launch; };
    r.ended = [state] { launchEnded(*state); };
    return watchOf(w, std::move(keep), std::move(r));
  };
  for (size_t p = 1; p < group.size(); ++p) job->otherPorts.push_back(group[p]->proxy->launchPort());
  PinnedBlock staging;
  BRAID_TRY(first->stagingBlock(im->imageBytes, &staging));
  job->blocks.push_back(staging);
  if (const cudaError_t err = cudaMalloc(&l.block, im->blockBytes()); err != cudaSuccess) {
    first->pool().release(staging);
    return cudaFailure("cudaMalloc", err);
  }
  l.blockBytes = im->blockBytes();
  // From here the proxies own the memory (released at once if the graph
  // cannot take the job).
  for (size_t p = 1; p < group.size(); ++p) group[p]->proxy->shareCaptured(job);
  BRAID_TRY(first->adoptCaptured(job, graph));
  *out = std::move(job);
  return Result::success();
}

// A launch in a graph being captured (BRAID_GRAPH_ENGINE=kernels): the image
// is written once, and each launch of the graph copies it into the graph's
// device block (every pointer in it was written for that block; the FIFO
// positions are the Ports', in device memory, so each launch continues where
// the last kernel stopped), counts itself for its watch and zeroes the
// beacons (the launch-mark kernel), then runs the plan kernel: no host
// function in the graph. Nothing orders it after the communicators' other
// kernels: the graph's launches are in the user's stream order, as NCCL's are.
Result captureOnDevice(const Launch& launch, const std::vector<CommLaunch*>& group, cudaGraph_t graph) {
  DeviceProxy* first = group.front()->proxy;
  const cudaStream_t stream = static_cast<cudaStream_t>(const_cast<void*>(launch.stream));
  DeviceGuard guard(first->device());
  BRAID_TRY(guard.status());
  first->reclaim();
  ImageOfLaunch im = imageOf(group);
  std::shared_ptr<CapturedJob> job;
  BRAID_TRY(captureJob(group, graph, &im, &job));
  char* block = static_cast<char*>(job->lanes->block);
  BRAID_TRY(joinStreams(first->events(), stream, launch.joined));
  BRAID_TRY(writeImage(group, block, job->blocks.front(), &im, stream));
  const CapturedLanes& l = *job->lanes;
  BRAID_TRY(kernels::launchMarkLaunch(l.launchCount, reinterpret_cast<volatile uint64_t*>(l.firstBeacon),
                                      l.zeroedWords, stream));
  BRAID_TRY(executor::launchPlanLanes(reinterpret_cast<executor::LaneExec*>(block), im.nlanes, kThreadsPerLane,
                                      nullptr, im.anyFp8, stream));
  SharedEvent done;
  BRAID_TRY(first->events().record(stream, &done));
  BRAID_TRY(releaseStreams(*done, launch.joined));
  first->watch().add(std::make_unique<GraphLaunchWatch>(std::move(job)));
  return Result::success();
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
    parts.push_back({c.comm->rank, c.proxy->device(), c.stream, uint32_t(c.cp().program.lanes.size())});
    if (resident.count(c.proxy->device())) continue;
    DeviceGuard guard(c.proxy->device());
    BRAID_TRY(guard.status());
    BRAID_TRY(executor::residentPlanLanes(kThreadsPerLane, &resident[c.proxy->device()]));
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
    StreamCapture capture;
    BRAID_TRY(captureOf(static_cast<cudaStream_t>(const_cast<void*>(launch.stream)), &capture));
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
