// What every plan-kernel launch is made of, eager (cuda_lane_launch.cc) or
// captured in a CUDA graph (cuda_lane_capture.cc): one communicator's calls
// of the group (CommLaunch), the lanes' image written for the device block it
// is copied into, the streams the launch joins and releases, and what the
// watch of its lanes is made from. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/result.h"
#include "engine/device/cuda_launch_cache.h"
#include "engine/device/cuda_proxy.h"
#include "engine/lanes/beacon_watch.h"
#include "engine/lanes/comm_program.h"
#include "engine/lanes/lane_image.h"
#include "engine/task.h"

namespace braid::device {

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

// The launch stream waits for the work already on each joined stream (each
// event is free again once the wait is enqueued).
Result joinStreams(EventPool& events, cudaStream_t stream, const std::vector<const void*>& joined);

// Each joined stream goes on only after the launch (`done`, its end).
Result releaseStreams(const PooledEvent& done, const std::vector<const void*>& joined);

// What a launch's watchdog (lanes/beacon_watch.h) is made from: each
// communicator's calls and lanes as the host planned them, and its beacons.
struct WatchedComm {
  ncclComm* comm = nullptr;
  lanes::PortTable* ports = nullptr;
  std::vector<engine::Task> tasks;
  std::shared_ptr<const lanes::LaneProgram> program;  // shared with a kept launch
  const executor::LaneBeacon* beacons = nullptr;
};

struct WatchedLaunch {
  std::vector<WatchedComm> comms;
  std::vector<DeviceProxy*> proxies;  // stopping the lanes raises every one's abort word
};

// The launch's communicators' calls and lanes as planned, each seen through
// its beacons from `beacons`' first (a kept launch's program is shared: the
// watch holds it even after the kept launch is replaced).
WatchedLaunch watchedLaunchOf(const std::vector<CommLaunch*>& group, const BeaconLease& beacons);
// The watch of one launch (a graph's: `replay`); stopping its lanes raises
// every communicator's abort word; `keep` keeps the beacons while it reads.
std::unique_ptr<lanes::BeaconWatch> watchOf(WatchedLaunch w, std::shared_ptr<const void> keep,
                                            lanes::WatchedReplay replay = {});

// The lanes image of a launch: each communicator's part, and where the
// scratch starts in the device block. An eager launch carries an image of at
// most LaunchImage::maxBytes() in its parameters (kernels/executor/launch_image.h),
// as does a graph's (its generation is the graph's launch count); a larger
// one and one with device scalars are uploaded.
struct ImageOfLaunch {
  std::vector<lanes::ImagePart> parts;
  size_t scratchBytes = 0;
  bool anyFp8 = false;
  uint32_t nlanes = 0;
  // Known once the beacons and peer tables are set (sizeImage): its bytes,
  // those written and uploaded (all but the LL staging), where each part's
  // operations are.
  lanes::LaneImageLayout layout;
  size_t scratchAt = 0;
  size_t blockBytes() const { return scratchAt + scratchBytes; }
};

// The parts of the group's communicators, before beacons and peer tables.
ImageOfLaunch imageOf(const std::vector<CommLaunch*>& group);
// One failure word for the launch: a lane that fails ends every lane of it,
// whichever communicator it belongs to. A watched launch's is the beacon
// after its lanes' (from `beacons`); an unwatched one's (null) the first
// communicator's shared word.
void setBeacons(DeviceProxy* first, const BeaconLease* beacons, ImageOfLaunch* im);
// The image's size and where the scratch starts, once the beacons are set.
void sizeImage(const std::vector<CommLaunch*>& group, ImageOfLaunch* im);
// Writes the image for `block` into `dst` (layout.written bytes, 8-byte
// aligned).
Result writeImage(const std::vector<CommLaunch*>& group, char* block, void* dst, ImageOfLaunch* im);
// The image `kept` carried last, if it was written for this launch's parts
// (the same lane programs, in order) and kept->block; else null.
const KeptImage* keptImageFor(const std::vector<CommLaunch*>& group, const CachedLaunch* kept);
// The image's size and where the scratch starts, from a kept image (instead
// of sizeImage).
void sizeFromKept(const KeptImage& k, ImageOfLaunch* im);
// Writes the image into a new KeptImage of `kept` (whose block the launch
// uses), for later launches of the same parts to refresh.
Result keepImage(const std::vector<CommLaunch*>& group, CachedLaunch* kept, ImageOfLaunch* im);
// Rewrites what this launch changes in the kept image: the calls' buffers and
// fingerprints, the lanes' beacons and failure word.
void refreshImage(const std::vector<CommLaunch*>& group, KeptImage* k, ImageOfLaunch* im);
// Whether a call of the group reads its PreMulSum scalar from device memory:
// its launch copies it into the image on the stream, after the image.
bool readsDeviceScalars(const std::vector<CommLaunch*>& group);
// Whether the launch carries its image in its parameters (written, sized):
// it fits, and no scalar is copied into it on the stream (block 0 would
// overwrite that copy).
bool carriesImage(const std::vector<CommLaunch*>& group, const ImageOfLaunch& im);
// Enqueues the copy of the image written in `staging` to `block`, then each
// device-resident PreMulSum scalar's.
Result uploadImage(const std::vector<CommLaunch*>& group, char* block, const PinnedBlock& staging,
                   const ImageOfLaunch& im, cudaStream_t stream);

}  // namespace braid::device
