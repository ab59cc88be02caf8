#include "tuning/device_channels.h"

#include <algorithm>
#include <map>
#include <utility>

namespace braid::tuning {

int deviceChannelCap(const std::vector<PeerInfo>& peers, int allowed, int most, int lanesPerSm) {
  std::map<std::pair<uint64_t, int32_t>, int> ranksOnGpu;  // (host, PCI address)
  for (const PeerInfo& p : peers)
    if (p.gpuBusId >= 0 && p.gpuSms > 0) ++ranksOnGpu[{p.hostHash, p.gpuBusId}];
  int cap = most;
  bool any = false;
  for (const PeerInfo& p : peers) {
    if (p.gpuBusId < 0 || p.gpuSms <= 0) continue;
    any = true;
    cap = std::min(cap, p.gpuSms * lanesPerSm / ranksOnGpu[{p.hostHash, p.gpuBusId}]);
  }
  if (!any) return 1;
  return std::max(1, std::min(cap, allowed));
}

int deviceChannelsFor(uint64_t operationBytes, int cap, uint64_t bytesPerChannel) {
  const uint64_t wanted = (operationBytes + bytesPerChannel - 1) / bytesPerChannel;
  return int(std::max<uint64_t>(1, std::min<uint64_t>(wanted, uint64_t(std::max(cap, 1)))));
}

}  // namespace braid::tuning
