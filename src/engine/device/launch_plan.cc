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

std::string timeSlicedPeers(const std::vector<PeerInfo>& peers, bool mps) {
  if (mps) return "";
  for (const PeerInfo& a : peers) {
    if (a.gpuBusId < 0) continue;
    std::string ranks;
    bool otherProcess = false;
    for (const PeerInfo& b : peers) {
      if (b.hostHash != a.hostHash || b.gpuBusId != a.gpuBusId) continue;
      otherProcess = otherProcess || b.processId != a.processId;
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(b.rank);
    }
    if (!otherProcess) continue;
    char text[240];
    snprintf(text, sizeof text, "ranks %s share a GPU (PCI %04x:%02x:%02x) from different processes, and no MPS "
             "daemon runs", ranks.c_str(), unsigned(a.gpuBusId) >> 16, (unsigned(a.gpuBusId) >> 8) & 0xff,
             unsigned(a.gpuBusId) & 0xff);
    return text;
  }
  return "";
}

bool mpsDaemonRunning() {
  const std::string dir = envString("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps");
  struct stat st;
  return stat((dir + "/control").c_str(), &st) == 0;
}

}  // namespace braid::device
