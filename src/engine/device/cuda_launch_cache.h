// Plan-kernel launches of one communicator's calls, kept per shape, as the
// host runner keeps its groups (lanes/plan_cache.h): a training loop issues
// the same calls on the same stream over and over, and planning them, making
// a device block for their image and scratch, and freeing it again, is host
// work on every call's critical path. An entry keeps the lane program, the
// device block and the image it last carried; a repeated call only rebinds
// its buffers in that image, which its launch carries (or, when it is too
// large to, writes and uploads it before), in stream order behind the
// previous launch that used the block (a communicator's plan kernels run one
// after another: DeviceProxy::orderLaneKernel). A launch of several
// communicators' calls (one thread driving several ranks on one device)
// keeps each one's program in its own cache and uses the first one's block
// for the whole launch.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "base/result.h"
#include "engine/device/cuda_proxy.h"
#include "engine/lanes/comm_program.h"
#include "engine/lanes/lane_image.h"
#include "engine/lanes/plan_cache.h"
#include "kernels/executor/launch_image.h"

namespace braid::device {

// The image a kept launch last carried (kernels/executor/launch_image.h),
// and what it was written for: a launch of the same parts (each part's lane
// program, still alive: a program planned later, even at the same address,
// never passes for one that is gone) into the same block only refreshes it
// (lanes::refreshLaneImage) instead of laying it out and writing it again.
struct KeptImage {
  std::vector<std::weak_ptr<const lanes::LaneProgram>> parts;  // each part's program, in order
  char* block = nullptr;
  lanes::LaneImageLayout layout;
  size_t scratchAt = 0;
  executor::LaunchImage carried;
};

struct CachedLaunch {
  cudaStream_t stream = nullptr;
  bool peerAccess = false;  // planned to address its ranks' buffers (lanes/peer_access.h)
  lanes::CommProgram cp;
  char* block = nullptr;  // device memory for the image and scratch, or null before the first launch
  size_t blockBytes = 0;
  // A device word after the block's bytes, zero when the block was made: the
  // gate of an image a launch carries (kernels/executor/launch_image.h), and
  // the generation of the last launch that used the block.
  uint64_t* gate = nullptr;
  uint64_t generation = 0;
  SharedEvent done;       // the end of the last launch that used the block (null: none yet)
  unsigned long long doneStream = 0;  // cudaStreamGetId of that launch's stream (0: unknown)
  bool connected = false;  // its FIFOs were made (connect succeeded once)
  std::unique_ptr<KeptImage> image;  // of launches whose block this entry lends
};

// The communicator's kept launches (lanes::GroupCache: 16, least recently
// used replaced), keyed by their calls, stream and peer access.
class LaunchCache {
 public:
  LaunchCache() = default;
  // What was not released stays allocated: a kernel may still use it.
  ~LaunchCache() = default;
  LaunchCache(const LaunchCache&) = delete;
  LaunchCache& operator=(const LaunchCache&) = delete;

  // Made with the communicator's device work (else by the first block): the
  // stream where blocks are freed, after the last launch that used them (no
  // CUDA call may wait for the device).
  Result start();

  CachedLaunch* find(cudaStream_t stream, bool peerAccess, const std::vector<const engine::Task*>& tasks);
  // A replaced entry's block is freed in stream order after its last launch.
  CachedLaunch* insert(const std::vector<const engine::Task*>& tasks, std::unique_ptr<CachedLaunch> entry);
  // A block of at least `bytes` for the entry's next launch: the one it has,
  // or a new one in stream order on its stream (the old one freed after its
  // last launch), its gate zeroed in stream order.
  Result blockFor(CachedLaunch* entry, size_t bytes);
  // A block for a launch a graph captures (the graph's for its life), from
  // the stream-ordered pool on a stream nothing else uses, ready when this
  // returns: a cudaMalloc may wait for the device, another thread rank's
  // waiting kernel included. A zeroed word after its `bytes` is the gate of
  // the image each launch carries (kernels/executor/launch_image.h).
  Result allocateNow(size_t bytes, void** out, uint64_t** gate);
  // Frees such a block once no launch can use it; false after release().
  bool freeAllocated(void* block);
  // Once every launch has ended: frees the blocks and the streams.
  void release();

 private:
  void drop(CachedLaunch& entry);

  cudaStream_t freeStream_ = nullptr;
  cudaStream_t allocStream_ = nullptr;  // allocateNow's and freeAllocated's only
  lanes::GroupCache<CachedLaunch> entries_;
};

}  // namespace braid::device
