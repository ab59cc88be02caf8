// How a group's plan-kernel lanes become kernel launches (pure: no CUDA, so
// the CPU tests check it against the GPU's scheduling rules,
// tests/emulation/residency_test.cc).
//
// A lane spins until its peer's message arrives, and a GPU runs blocks
// without preemption: a lane whose peer is not resident waits for ever once
// the resident lanes fill the device. Kernels on different streams may run
// together but never must. So every lane of a device's communicators in a
// group goes into ONE launch (its streams joined: the launch waits for each
// of them, and each waits for the launch), and a launch with more lanes than
// the device holds resident is refused instead of hanging.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/result.h"

namespace braid {

// One communicator's part of the group.
struct LaunchPart {
  int rank = 0;                   // for messages
  int device = 0;
  const void* stream = nullptr;   // its calls' stream (a cudaStream_t)
  uint32_t lanes = 0;
};

struct Launch {
  int device = 0;
  const void* stream = nullptr;        // where it is launched: its first part's stream
  std::vector<const void*> joined;     // the other streams of its parts, once each
  std::vector<size_t> parts;           // indices into the parts, in their order
  uint32_t lanes = 0;
};

// One launch per device, in order of first use. residentLanes(device): how
// many lanes (blocks) the device holds resident at once.
Result planLaunches(const std::vector<LaunchPart>& parts, const std::function<uint32_t(int device)>& residentLanes,
                    std::vector<Launch>* out);

}  // namespace braid
