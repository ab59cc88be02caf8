// A plan-kernel launch in a CUDA graph being captured
// (BRAID_GRAPH_ENGINE=kernels, chosen by cuda_device_path.cc): the graph owns
// the image, its device block and the beacons, each launch of the graph
// counts itself (kernels/launch_mark.h) and the first communicator's watch
// thread watches it. CUDA builds only.
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "base/result.h"
#include "engine/device/cuda_lane_image.h"
#include "engine/device/launch_plan.h"

namespace braid::device {

// Captures the launch of `group` (one device) on launch.stream, which `graph`
// captures, with the other streams of the launch joined.
Result captureOnDevice(const Launch& launch, const std::vector<CommLaunch*>& group, cudaGraph_t graph);

}  // namespace braid::device
