// How many channels a plan kernel's call runs on (BRAID_DEVICE_ENGINE=kernels).
// A channel is a lane per rank, and a lane is one CUDA block: one block moves
// a few percent of what a GPU's memory does (docs/performance.md, the H200
// run: 6-7 GB/s with one channel), so large calls spread over channels, up
// to what the GPU's multiprocessors hold for the ranks sharing it and what
// the communicator's FIFO arena holds. Every rank computes the same numbers
// from what all ranks told each other at creation (PeerInfo).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/peer_info.h"

namespace braid::tuning {

// The most channels a plan kernel may use.
constexpr int kMaxDeviceChannels = 8;
// A channel per this many bytes of a call (its whole buffer).
constexpr uint64_t kDeviceBytesPerChannel = uint64_t(512) << 10;

// The communicator's cap: the fewest multiprocessors any rank's GPU gives
// each of the communicator's ranks on it (PeerInfo::gpuSms, ranks that share
// a GPU share its multiprocessors), at most `allowed` (the channels whose
// FIFOs the arena holds, and ncclConfig_t::maxCTAs) and kMaxDeviceChannels;
// 1 when no rank told its GPU.
int deviceChannelCap(const std::vector<PeerInfo>& peers, int allowed);

// Channels for a call whose buffers hold `operationBytes` (CollShape's
// operation bytes: the largest buffer, alike on every rank).
int deviceChannelsFor(uint64_t operationBytes, int cap);

}  // namespace braid::tuning
