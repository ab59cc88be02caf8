#include "engine/device/cuda_lane_image.h"

#include <algorithm>
#include <cstddef>
#include <map>

#include "base/cuda_util.h"
#include "engine/comm.h"
#include "engine/lanes/peer_access.h"

namespace braid::device {

namespace {

size_t align(size_t n, size_t to) { return (n + to - 1) / to * to; }

// The operations' buffers and reductions, scratch in the device block.
std::vector<executor::OpBuffers> opsOf(const CommLaunch& c, char* scratch) {
  std::vector<executor::OpBuffers> ops;
  for (size_t i = 0; i < c.tasks.size(); ++i)
    ops.push_back(lanes::opBuffersOf(*c.tasks[i], scratch + c.cp().scratchOffsets[i], c.cp().shapeFingerprints[i]));
  return ops;
}

// Each part's operations' buffers, its scratch in the device block after the
// image.
void setOps(const std::vector<CommLaunch*>& group, char* block, ImageOfLaunch* im) {
  size_t scratchNext = im->scratchAt;
  for (size_t p = 0; p < group.size(); ++p) {
    im->parts[p].ops = opsOf(*group[p], block + scratchNext);
    scratchNext += align(group[p]->cp().scratchBytes, 256);
  }
}

// Sizes the peer table of each call that addresses its peers (its one
// call's), for the layout and the image (unless sized already);
// fillPeerTables writes the addresses.
void addPeerTables(const std::vector<CommLaunch*>& group, std::vector<lanes::ImagePart>* parts) {
  for (size_t p = 0; p < group.size(); ++p)
    if (!group[p]->peerRanks.empty() && (*parts)[p].peerOps.empty())
      (*parts)[p].peerOps = {std::vector<uintptr_t>(group[p]->peerRanks.size())};
}

// Every peer's OpBuffers is in this launch's image at `block`.
void fillPeerTables(const std::vector<CommLaunch*>& group, const lanes::LaneImageLayout& layout, uintptr_t block,
                    std::vector<lanes::ImagePart>* parts) {
  std::map<const ncclComm*, size_t> partOf;
  for (size_t p = 0; p < group.size(); ++p) partOf[group[p]->comm] = p;
  for (size_t p = 0; p < group.size(); ++p) {
    const std::vector<ncclComm*>& ranks = group[p]->peerRanks;
    for (size_t r = 0; r < ranks.size(); ++r)
      (*parts)[p].peerOps[0][r] = block + layout.opBuffersAt(partOf.at(ranks[r]), 0);
  }
}

}  // namespace

Result joinStreams(EventPool& events, cudaStream_t stream, const std::vector<const void*>& joined) {
  for (const void* other : joined) {
    SharedEvent ready;
    BRAID_TRY(events.record(static_cast<cudaStream_t>(const_cast<void*>(other)), &ready));
    BRAID_CUDA_TRY(cudaStreamWaitEvent(stream, ready->get(), 0));
  }
  return Result::success();
}

Result releaseStreams(const PooledEvent& done, const std::vector<const void*>& joined) {
  for (const void* other : joined)
    BRAID_CUDA_TRY(cudaStreamWaitEvent(static_cast<cudaStream_t>(const_cast<void*>(other)), done.get(), 0));
  return Result::success();
}

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
    at += wc.program->lanes.size();
    w.comms.push_back(std::move(wc));
    w.proxies.push_back(c->proxy);
  }
  return w;
}

std::unique_ptr<lanes::BeaconWatch> watchOf(WatchedLaunch w, std::shared_ptr<const void> keep,
                                            lanes::WatchedReplay replay) {
  auto watched = std::make_unique<lanes::LaneGroup>();
  for (WatchedComm& c : w.comms)
    lanes::watchLanes(watched.get(), c.comm, c.ports, std::move(c.tasks), std::move(c.program), c.beacons);
  std::vector<DeviceProxy*> proxies = std::move(w.proxies);
  return std::make_unique<lanes::BeaconWatch>(
      std::move(watched), [proxies] { for (DeviceProxy* p : proxies) p->abort(); }, std::move(keep),
      std::move(replay));
}

ImageOfLaunch imageOf(const std::vector<CommLaunch*>& group) {
  ImageOfLaunch im;
  for (const CommLaunch* c : group) {
    im.scratchBytes += align(c->cp().scratchBytes, 256);
    for (const engine::Task* t : c->tasks)
      im.anyFp8 = im.anyFp8 || t->type == ncclFloat8e4m3 || t->type == ncclFloat8e5m2;
  }
  im.parts.resize(group.size());
  for (size_t p = 0; p < group.size(); ++p) {
    const CommLaunch* c = group[p];
    lanes::PortTable* ports = &c->proxy->lanePorts();
    im.parts[p].program = c->cp().program.get();
    im.parts[p].ops.resize(c->tasks.size());  // sized for the layout; filled by writeImage
    im.parts[p].portOf = [ports](const lanes::PortKey& k) { return ports->port(k); };
    im.parts[p].abortWord = const_cast<const uint32_t*>(c->proxy->words().deviceAbort());
    im.nlanes += uint32_t(im.parts[p].program->lanes.size());
  }
  return im;
}

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
  im->layout = lanes::laneImageLayout(im->parts);
  im->scratchAt = align(im->layout.bytes, 256);
}

Result writeImage(const std::vector<CommLaunch*>& group, char* block, void* dst, ImageOfLaunch* im) {
  addPeerTables(group, &im->parts);  // sized by sizeImage, not by sizeFromKept
  setOps(group, block, im);
  fillPeerTables(group, im->layout, reinterpret_cast<uintptr_t>(block), &im->parts);
  return lanes::writeLaneImage(im->parts, reinterpret_cast<uintptr_t>(block), dst);
}

const KeptImage* keptImageFor(const std::vector<CommLaunch*>& group, const CachedLaunch* kept) {
  const KeptImage* k = kept->image.get();
  if (k == nullptr || k->block != kept->block || k->parts.size() != group.size()) return nullptr;
  for (size_t p = 0; p < group.size(); ++p)
    if (k->parts[p].lock() != group[p]->cp().program) return nullptr;
  return k;
}

void sizeFromKept(const KeptImage& k, ImageOfLaunch* im) {
  im->layout = k.layout;
  im->scratchAt = k.scratchAt;
}

Result keepImage(const std::vector<CommLaunch*>& group, CachedLaunch* kept, ImageOfLaunch* im) {
  kept->image.reset();
  auto k = std::make_unique<KeptImage>();
  for (const CommLaunch* c : group) k->parts.push_back(c->cp().program);
  k->block = kept->block;
  k->layout = im->layout;
  k->scratchAt = im->scratchAt;
  BRAID_TRY(writeImage(group, kept->block, k->carried.data, im));
  kept->image = std::move(k);
  return Result::success();
}

void refreshImage(const std::vector<CommLaunch*>& group, KeptImage* k, ImageOfLaunch* im) {
  setOps(group, k->block, im);
  lanes::refreshLaneImage(im->parts, im->layout, k->carried.data);
}

bool readsDeviceScalars(const std::vector<CommLaunch*>& group) {
  for (const CommLaunch* c : group)
    for (const engine::Task* t : c->tasks)
      if (t->deviceScalar != nullptr) return true;
  return false;
}

bool carriesImage(const std::vector<CommLaunch*>& group, const ImageOfLaunch& im) {
  return im.layout.written <= executor::LaunchImage::maxBytes() && !readsDeviceScalars(group);
}

// The image first, then each device-resident PreMulSum scalar into its
// operation's RedOp: the kernel uses the value the stream had at this point,
// as NCCL's kernels read it when they run.
Result uploadImage(const std::vector<CommLaunch*>& group, char* block, const PinnedBlock& staging,
                   const ImageOfLaunch& im, cudaStream_t stream) {
  BRAID_CUDA_TRY(cudaMemcpyAsync(block, staging.data, im.layout.written, cudaMemcpyHostToDevice, stream));
  for (size_t p = 0; p < group.size(); ++p)
    for (size_t i = 0; i < group[p]->tasks.size(); ++i) {
      const engine::Task& t = *group[p]->tasks[i];
      if (t.deviceScalar == nullptr) continue;
      char* scalar = block + im.layout.opBuffersAt(p, i) + offsetof(executor::OpBuffers, op) +
                     offsetof(reduce::RedOp, scalar);
      BRAID_CUDA_TRY(
          cudaMemcpyAsync(scalar, t.deviceScalar, reduce::typeSize(t.type), cudaMemcpyDeviceToDevice, stream));
    }
  return Result::success();
}

}  // namespace braid::device
