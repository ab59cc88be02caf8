#include "engine/device/cuda_lane_capture.h"

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "base/cuda_quiet_free.h"
#include "base/cuda_util.h"
#include "engine/comm.h"
#include "kernels/executor/plan_kernel.h"
#include "kernels/launch_mark.h"

namespace braid::device {

namespace {

// A watch saw a captured launch's kernel end (or stopped watching it): it is
// no longer counted outstanding.
void launchEnded(CapturedLanes& l) {
  if (l.running.exchange(false)) addOutstandingKernels(-1);
}

// Whether every lane's beacon says ended; `anyRunning` set when one says not.
bool lanesEndedOf(const CapturedLanes& l, bool* anyRunning) {
  // The beacons the launch-mark kernel zeroes: the lanes', then the failure word's.
  const size_t lanes = size_t(l.zeroedWords) * sizeof(uint64_t) / sizeof(executor::LaneBeacon) - 1;
  bool all = true;
  for (size_t i = 0; i < lanes; ++i)
    if (executor::loadAcquire(&l.firstBeacon[i].ended) == 0) all = false;
  *anyRunning = *anyRunning || !all;
  return all;
}

// How long after a launch is seen counted its lanes' beacons surely are
// zeroed: the launch-mark kernel counts the launch, then zeroes them (a
// time slice of another process may fall in between).
constexpr auto kMarkGrace = std::chrono::milliseconds(50);

// A launch's end as the bridge pump sees it (a graph's launch happens without
// braid, so its watch starts the pump): a later launch is counted (the same
// stream ran this one's kernel first), the graph is gone, or every lane ended
// once its beacons were zeroed (seen running, or kMarkGrace after the count).
std::function<bool()> launchEndOf(std::shared_ptr<CapturedJob> job, uint64_t launch) {
  auto seenRunning = std::make_shared<bool>(false);  // one pump thread calls it
  return [job = std::move(job), launch, seenRunning, since = std::chrono::steady_clock::now()] {
    const CapturedLanes& l = *job->lanes;
    if (job->released.load() || __atomic_load_n(l.launchCount, __ATOMIC_ACQUIRE) != launch) return true;
    if (!lanesEndedOf(l, seenRunning.get())) return false;
    return *seenRunning || std::chrono::steady_clock::now() - since > kMarkGrace;
  };
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
  ~GraphLaunchWatch() override {
    awaitLatestLaunch();
    launchEnded(*job_->lanes);
  }

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
        job_->port->pumpUntil(launchEndOf(job_, launch));
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
  // The watch goes with its communicator (whose destruction raised the abort
  // word) while the graph lives: the latest launch, seen or counted since
  // the last look, may still run. Its kernel stays counted outstanding, so
  // that no free of braid's (which may wait for the device) runs under it,
  // until its lanes end, up to kEndWait.
  void awaitLatestLaunch() {
    CapturedLanes& l = *job_->lanes;
    if (job_->released.load() || __atomic_load_n(l.launchCount, __ATOMIC_ACQUIRE) == 0) return;
    if (!l.running.exchange(true)) addOutstandingKernels(1);
    const auto until = std::chrono::steady_clock::now() + kEndWait;
    bool anyRunning = false;
    while (!lanesEndedOf(l, &anyRunning) && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

  static constexpr auto kEndWait = std::chrono::seconds(5);
  std::shared_ptr<CapturedJob> job_;
  uint64_t seen_ = 0;  // the launches counted when the watch last looked
  std::unique_ptr<lanes::BeaconWatch> current_;
};

// The job of a launch a CUDA graph captures: its device block (and, for an
// image the launch does not carry, the image in pinned memory), the graph's,
// its beacons (the lanes', the failure word's, the launch count's) for the
// graph's life, and how the watch of each launch of the graph is made. The first communicator's proxy adopts it (and
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
  if (!carriesImage(group, *im)) {
    BRAID_TRY(first->stagingBlock(im->layout.written, &staging));
    job->blocks.push_back(staging);
  }
  if (Result r = first->launchCache().allocateNow(im->blockBytes(), &l.block, &l.gate); !r.ok()) {
    if (staging.data != nullptr) first->pool().release(staging);
    return r;
  }
  l.blockBytes = im->blockBytes();
  // From here the proxies own the memory (released at once if the graph
  // cannot take the job).
  for (size_t p = 1; p < group.size(); ++p) group[p]->proxy->shareCaptured(job);
  BRAID_TRY(first->adoptCaptured(job, graph));
  *out = std::move(job);
  return Result::success();
}

}  // namespace

// A launch in a graph being captured (BRAID_GRAPH_ENGINE=kernels): the image
// is written once, and each launch of the graph counts itself for its watch
// and zeroes the beacons (the launch-mark kernel), then runs the plan kernel,
// which carries the image in its parameters and writes it into the graph's
// device block, the launch count its gate's generation (a larger image is
// copied there before, from pinned memory). Every pointer in it was written
// for that block; the FIFO positions are the Ports', in device memory, so
// each launch continues where the last kernel stopped. No host function in
// the graph. Nothing orders it after the communicators' other kernels: the
// graph's launches are in the user's stream order, as NCCL's are.
Result captureOnDevice(const Launch& launch, const std::vector<CommLaunch*>& group, cudaGraph_t graph) {
  DeviceProxy* first = group.front()->proxy;
  const cudaStream_t stream = static_cast<cudaStream_t>(const_cast<void*>(launch.stream));
  DeviceGuard guard(first->device());
  BRAID_TRY(guard.status());
  first->reclaim();
  ImageOfLaunch im = imageOf(group);
  std::shared_ptr<CapturedJob> job;
  BRAID_TRY(captureJob(group, graph, &im, &job));
  // Made now, on this thread: each launch's watch has it pump FIFOs bridged
  // to other hosts (a group spanning hosts has one communicator).
  first->bridgePump();
  char* block = static_cast<char*>(job->lanes->block);
  BRAID_TRY(joinStreams(first->events(), stream, launch.joined));
  const CapturedLanes& l = *job->lanes;
  std::unique_ptr<executor::LaunchImage> carried;
  if (carriesImage(group, im)) {  // as captureJob decided: no pinned block
    carried = std::make_unique<executor::LaunchImage>();
    BRAID_TRY(writeImage(group, block, carried->data, &im));
    carried->words = uint32_t(im.layout.written / sizeof(uint64_t));
    carried->gate = l.gate;
    carried->generationAt = l.launchCount;
  } else {
    BRAID_TRY(writeImage(group, block, job->blocks.front().data, &im));
    BRAID_TRY(uploadImage(group, block, job->blocks.front(), im, stream));
  }
  BRAID_TRY(kernels::launchMarkLaunch(l.launchCount, reinterpret_cast<volatile uint64_t*>(l.firstBeacon),
                                      l.zeroedWords, stream));
  BRAID_TRY(executor::launchPlanLanes(first->planDevice(), reinterpret_cast<executor::LaneExec*>(block), im.nlanes,
                                      kThreadsPerLane, nullptr, im.anyFp8, stream, carried.get()));
  SharedEvent done;
  BRAID_TRY(first->events().record(stream, &done));
  BRAID_TRY(releaseStreams(*done, launch.joined));
  first->watch().add(std::make_unique<GraphLaunchWatch>(std::move(job)));
  return Result::success();
}

}  // namespace braid::device
