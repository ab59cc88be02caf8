#include "engine/device/launch_plan.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>

#include "base/env.h"

namespace braid::device {

Result planLaunches(const std::vector<LaunchPart>& parts, const std::function<uint32_t(int device)>& residentLanes,
                    std::vector<Launch>* out) {
  std::vector<Launch> launches;
  for (size_t i = 0; i < parts.size(); ++i) {
    const LaunchPart& p = parts[i];
    auto it = std::find_if(launches.begin(), launches.end(), [&](const Launch& l) { return l.device == p.device; });
    if (it == launches.end()) {
      launches.emplace_back();
      it = launches.end() - 1;
      it->device = p.device;
      it->stream = p.stream;
    } else if (p.stream != it->stream &&
               std::find(it->joined.begin(), it->joined.end(), p.stream) == it->joined.end()) {
      it->joined.push_back(p.stream);
    }
    it->parts.push_back(i);
    it->lanes += p.lanes;
  }
  for (const Launch& l : launches) {
    const uint32_t fit = residentLanes(l.device);
    if (l.lanes <= fit) continue;
    std::string ranks;
    for (size_t i : l.parts) ranks += (ranks.empty() ? "" : ", ") + std::to_string(parts[i].rank);
    return fail(ncclInvalidUsage,
                "BRAID_DEVICE_ENGINE=kernels: ranks %s on CUDA device %d need %u lanes resident at once, but the "
                "device holds %u: fewer ranks on the device, fewer channels (BRAID_NCHANNELS), or the staged engine "
                "(unset BRAID_DEVICE_ENGINE)",
                ranks.c_str(), l.device, l.lanes, fit);
  }
  *out = std::move(launches);
  return Result::success();
}

std::string timeSlicedPeers(const std::vector<PeerInfo>& peers, int self, bool mps) {
  if (mps || self < 0 || size_t(self) >= peers.size()) return "";
  const PeerInfo& me = peers[size_t(self)];
  if (me.gpuBusId < 0) return "";
  std::string ranks;
  for (const PeerInfo& p : peers)
    if (p.rank != self && p.hostHash == me.hostHash && p.processId != me.processId && p.gpuBusId == me.gpuBusId)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(p.rank);
  if (ranks.empty()) return "";
  char text[200];
  snprintf(text, sizeof text, "rank %d shares its GPU (PCI %04x:%02x:%02x) with ranks %s of other processes, and no "
           "MPS daemon runs", self, unsigned(me.gpuBusId) >> 16, (unsigned(me.gpuBusId) >> 8) & 0xff,
           unsigned(me.gpuBusId) & 0xff, ranks.c_str());
  return text;
}

bool mpsDaemonRunning() {
  const std::string dir = envString("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps");
  struct stat st;
  return stat((dir + "/control").c_str(), &st) == 0;
}

}  // namespace braid::device
