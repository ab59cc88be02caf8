// Channels of plan kernels (tuning/device_channels.h): from the GPUs the
// ranks told each other about, the FIFO arena and the size of a call.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "tuning/device_channels.h"

namespace braid {
namespace {

PeerInfo rankOn(uint64_t host, int32_t busId, int32_t sms) {
  PeerInfo p;
  std::memset(&p, 0, sizeof p);
  p.hostHash = host;
  p.gpuBusId = busId;
  p.gpuSms = sms;
  return p;
}

TEST(DeviceChannels, CapIsTheFewestMultiprocessorsPerRankOfAnyGpu) {
  // One rank per 132-SM GPU: the hard cap.
  EXPECT_EQ(tuning::deviceChannelCap({rankOn(1, 0x100, 132), rankOn(1, 0x200, 132)}, 100),
            tuning::kMaxDeviceChannels);
  // 32 ranks share one GPU of 132 SMs: 4 each.
  std::vector<PeerInfo> shared(32, rankOn(1, 0x100, 132));
  EXPECT_EQ(tuning::deviceChannelCap(shared, 100), 4);
  // The same PCI address on two hosts is two GPUs.
  std::vector<PeerInfo> twoHosts(16, rankOn(1, 0x100, 80));
  twoHosts.resize(32, rankOn(2, 0x100, 80));
  EXPECT_EQ(tuning::deviceChannelCap(twoHosts, 100), 5);
  // The smallest GPU of the communicator decides, for every rank alike.
  EXPECT_EQ(tuning::deviceChannelCap({rankOn(1, 0x100, 132), rankOn(1, 0x200, 6)}, 100), 6);
  // Never more than the arena's FIFOs hold, never less than one.
  EXPECT_EQ(tuning::deviceChannelCap({rankOn(1, 0x100, 132)}, 3), 3);
  EXPECT_EQ(tuning::deviceChannelCap({rankOn(1, 0x100, 132)}, 0), 1);
  std::vector<PeerInfo> crowded(200, rankOn(1, 0x100, 132));
  EXPECT_EQ(tuning::deviceChannelCap(crowded, 100), 1);
}

// PeerAccess plans have no FIFOs: their cap is the GPU's share alone, two
// blocks per multiprocessor, a channel per 128 KiB.
TEST(DeviceChannels, PeerAccessCapIsTheMultiprocessorShareUpToItsOwnLimit) {
  auto peerCap = [](const std::vector<PeerInfo>& peers, int allowed) {
    return tuning::deviceChannelCap(peers, allowed, tuning::kMaxPeerAccessChannels, tuning::kPeerAccessLanesPerSm);
  };
  std::vector<PeerInfo> four(4, rankOn(1, 0x100, 132));
  EXPECT_EQ(peerCap(four, INT32_MAX), 64);
  EXPECT_EQ(peerCap(four, 8), 8);  // maxCTAs
  std::vector<PeerInfo> eight(8, rankOn(1, 0x100, 132));
  EXPECT_EQ(peerCap(eight, INT32_MAX), 33);
  EXPECT_EQ(tuning::deviceChannelsFor(uint64_t(8) << 20, 64, tuning::kPeerAccessBytesPerChannel), 64);
  EXPECT_EQ(tuning::deviceChannelsFor(uint64_t(1) << 20, 64, tuning::kPeerAccessBytesPerChannel), 8);
}

TEST(DeviceChannels, RanksWithoutAGpuLeaveOneChannel) {
  EXPECT_EQ(tuning::deviceChannelCap({rankOn(1, -1, 0), rankOn(1, -1, 0)}, 100), 1);
  // A rank that told no GPU does not lower the others' cap.
  EXPECT_EQ(tuning::deviceChannelCap({rankOn(1, -1, 0), rankOn(1, 0x100, 132)}, 100), tuning::kMaxDeviceChannels);
}

TEST(DeviceChannels, AChannelPerHalfMebibyteUpToTheCap) {
  const uint64_t per = tuning::kDeviceBytesPerChannel;
  EXPECT_EQ(tuning::deviceChannelsFor(0, 8), 1);
  EXPECT_EQ(tuning::deviceChannelsFor(8, 8), 1);
  EXPECT_EQ(tuning::deviceChannelsFor(per, 8), 1);
  EXPECT_EQ(tuning::deviceChannelsFor(per + 1, 8), 2);
  EXPECT_EQ(tuning::deviceChannelsFor(5 * per, 8), 5);
  EXPECT_EQ(tuning::deviceChannelsFor(uint64_t(1) << 30, 8), 8);
  EXPECT_EQ(tuning::deviceChannelsFor(uint64_t(1) << 30, 3), 3);
  EXPECT_EQ(tuning::deviceChannelsFor(uint64_t(1) << 30, 0), 1);
}

}  // namespace
}  // namespace braid
