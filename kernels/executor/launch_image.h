// A small lane image carried by the plan kernel's launch itself, in its
// parameters, instead of a copy to device memory before the launch: a launch
// of a few short calls then costs one driver call on the stream, not two
// (the upload is a copy-engine operation the kernel waits behind), and no
// pinned staging block. Block 0 copies the image into the device block where
// its pointers point; the other blocks wait at the block's gate until it has.
// The same code runs in the CUDA kernel and in the CPU emulation of a block.
#pragma once

#include <cstdint>

#include "kernels/executor/device_memory_model.h"

namespace braid::executor {

struct LaunchImage {
  // Kernel parameters are limited to 4 KiB on every CUDA version; the lanes
  // and statuses pointers and this struct's header take the rest.
  static constexpr uint32_t kMaxWords = 496;
  // A word of device memory that lives as long as the block `data` is copied
  // into, zero when the block is made, and only written here: it holds the
  // generation of the last launch whose image reached the block.
  uint64_t* gate = nullptr;
  // Distinct for each launch that uses the block (a launch that finds this
  // value at the gate knows its own image is in place); never 0.
  uint64_t generation = 0;
  // Or, where set, a word that holds the launch's generation when it starts:
  // a CUDA graph's kernel node carries the same parameters on every replay,
  // so its generation is the graph's launch count, which the launch-mark
  // kernel before it bumps (kernels/launch_mark.h).
  const uint64_t* generationAt = nullptr;
  uint32_t words = 0;  // 0: no image here (it was uploaded before the launch)
  uint32_t unused = 0;
  uint64_t data[kMaxWords] = {};

  static constexpr size_t maxBytes() { return sizeof(uint64_t) * kMaxWords; }
};

// Called by every thread of block `block` before it reads its lane: on
// return the launch's image is at `dst` (the lanes' block) for every thread
// of every block. Block 0 writes it and opens the gate (release); the others
// wait for that (acquire): the blocks of a plan kernel are resident together,
// so the wait ends.
template <class Group>
BRAID_HD BRAID_INLINE void takeLaunchImage(const Group& g, uint32_t block, const LaunchImage& image, uint64_t* dst) {
  if (image.words == 0) return;
  // Only thread 0 of each block reads or writes the gate.
  const uint64_t generation =
      g.tid() != 0 ? 0 : image.generationAt != nullptr ? loadAcquire(image.generationAt) : image.generation;
  if (block == 0) {
    for (uint32_t i = g.tid(); i < image.words; i += g.size()) dst[i] = image.data[i];
    fenceSystem();
    g.sync();
    if (g.tid() == 0) storeRelease(image.gate, generation);
  } else if (g.tid() == 0) {
    for (uint64_t polls = 0; loadAcquire(image.gate) != generation; ++polls) pauseAfter(polls);
  }
  g.sync();
}

}  // namespace braid::executor
