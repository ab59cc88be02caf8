#include "engine/device/launch_plan.h"

#include <algorithm>

namespace braid {

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

}  // namespace braid
