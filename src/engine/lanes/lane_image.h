// The lanes of a group as one relocatable block of memory: the LaneExec
// array of every part (a communicator's program), then each part's
// operations' table and stage counters, and each lane's steps and
// port-pointer arrays; last, the LL lanes' staging (scratch, never written
// here). It is built on the host with every pointer computed for the address
// where the block will be used, so host threads run it in place and a CUDA
// kernel runs it after one copy of its written part to device memory: both
// executors run the same bytes, and one launch runs the lanes of every
// communicator on a stream.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "base/result.h"
#include "engine/lanes/lane_program.h"

namespace braid::lanes {

// The Port of a FIFO end, in memory the lanes' runner reaches.
using PortOf = std::function<executor::Port*(const PortKey&)>;

// One communicator's lanes in the block.
struct ImagePart {
  const LaneProgram* program = nullptr;
  std::vector<executor::OpBuffers> ops;  // buffers and reductions, at addresses the runner reaches
  PortOf portOf;
  const uint32_t* abortWord = nullptr;  // polled by every wait
  bool resumable = false;               // host runner: waits return WouldBlock (WaitControl)
  uint32_t* failureWord = nullptr;      // optional: the worst failed status (CUDA kernel)
  // Optional: one per lane of the part, where a watchdog that cannot read the
  // lanes' memory sees them (CUDA kernel: mapped host memory; beacon_watch.h).
  executor::LaneBeacon* beacons = nullptr;
  // Per operation (empty, or as many as `ops`): where every rank's OpBuffers
  // of that call is, in rank order, at addresses the runner reaches; written
  // into the block as the operation's peer table (OpBuffers::peers) for its
  // PeerReduce steps. Empty: the operation addresses no peer.
  std::vector<std::vector<uintptr_t>> peerOps;
};

// Where the block of `parts` puts what its users reach from outside, from
// one pass over the parts.
struct LaneImageLayout {
  size_t bytes = 0;  // the whole block
  // Its start, what writeLaneImage writes: all of it but the LL lanes'
  // staging (two buffers per LL lane, each of the lane's largest LL message),
  // which the lanes write before they read. A few KiB for small groups.
  size_t written = 0;
  std::vector<size_t> opsAt;  // per part: where its OpBuffers table starts
  // Where part `part`'s OpBuffers of operation `op` is (peer tables point
  // there; a device PreMulSum scalar is copied into its RedOp on the stream).
  size_t opBuffersAt(size_t part, size_t op) const;
};

LaneImageLayout laneImageLayout(const std::vector<ImagePart>& parts);

// Writes the block's first LaneImageLayout::written bytes into `dst` (8-byte aligned)
// for use at `base` (dst itself, or where it will be copied). The LaneExec
// array of all parts' lanes, in part order, is at its start. LL lanes get two
// staging buffers after that, not written, each of the lane's largest LL
// message rounded up to 8; the stage counters start at zero.
Result writeLaneImage(const std::vector<ImagePart>& parts, uintptr_t base, void* dst);

// Rewrites in `dst`, an image writeLaneImage wrote for the same programs,
// ports, peer tables, staging and block, what changes from one launch to the
// next: each part's operations (buffers, reductions, fingerprints; their peer
// tables stay) and each lane's beacon and failure word. A kept launch's
// image is refreshed, not written again.
void refreshLaneImage(const std::vector<ImagePart>& parts, const LaneImageLayout& layout, void* dst);

}  // namespace braid::lanes
