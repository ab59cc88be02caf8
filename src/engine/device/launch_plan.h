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
#include <string>
#include <vector>

#include "base/peer_info.h"
#include "base/result.h"

namespace braid::device {

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

// PeerInfo::gpuBusId of a GPU at PCI domain:bus:device (domain below 2^15).
inline int packGpuBusId(int domain, int bus, int device) {
  return ((domain & 0x7fff) << 16) | ((bus & 0xff) << 8) | (device & 0xff);
}

// Ranks of the communicator in different processes of one host on one GPU:
// without MPS their kernels only take turns on the GPU (time slices), and
// plan kernels that spin on each other would move a message per slice.
// Empty when there are none or `mps` (an MPS daemon serves this host's
// clients, whose kernels run together); else a text naming the first such
// GPU and its ranks. The same answer on every rank (from the peers'
// information alone): the engine choice that follows from it must agree,
// since a rank running plan kernels and a peer staging would never meet.
std::string timeSlicedPeers(const std::vector<PeerInfo>& peers, bool mps);

// Whether an MPS control daemon is running for this process's clients: its
// control socket in CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps).
bool mpsDaemonRunning();

}  // namespace braid::device
