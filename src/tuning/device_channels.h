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

// The most channels a plan kernel may use through FIFOs (on an H200, 4
// ranks through FIFOs: 16 channels moved 1.7x what 8 did from 8 to 512 MiB,
// docs/performance.md; the default FIFO arena holds 16).
constexpr int kMaxDeviceChannels = 16;
// PeerAccess plans have no FIFOs, and each channel is a block reading the
// peers' buffers with one 16-byte load per thread in flight: bandwidth grows
// with the blocks (on an H200, 4 ranks, 128 MiB: 56 GB/s algbw with 8
// channels, 105 with 16, 188 with 32; docs/performance.md). So up to two
// blocks per multiprocessor, and a channel per smaller share of the call.
constexpr int kMaxPeerAccessChannels = 64;
constexpr int kPeerAccessLanesPerSm = 2;
constexpr uint64_t kPeerAccessBytesPerChannel = uint64_t(128) << 10;
// A channel per this many bytes of a call (its whole buffer).
constexpr uint64_t kDeviceBytesPerChannel = uint64_t(512) << 10;

// The communicator's cap: the fewest multiprocessors any rank's GPU gives
// each of the communicator's ranks on it (PeerInfo::gpuSms, ranks that share
// a GPU share its multiprocessors), at most `allowed` (the channels whose
// FIFOs the arena holds, and ncclConfig_t::maxCTAs) and `most`; 1 when no
// rank told its GPU. `lanesPerSm` blocks per multiprocessor.
int deviceChannelCap(const std::vector<PeerInfo>& peers, int allowed, int most = kMaxDeviceChannels,
                     int lanesPerSm = 1);

// Channels for a call whose buffers hold `operationBytes` (CollShape's
// operation bytes: the largest buffer, alike on every rank): one per
// `bytesPerChannel`, at most `cap`.
int deviceChannelsFor(uint64_t operationBytes, int cap, uint64_t bytesPerChannel = kDeviceBytesPerChannel);

}  // namespace braid::tuning
