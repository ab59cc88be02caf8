// The plan interpreter as a kernel: block b runs lane b, each step with its
// operation's datatype. fp8 code exists only in sm_90+ builds (typed_step.h),
// as NCCL reduces fp8 only there, and the host refuses fp8 on older devices.
#include "kernels/executor/plan_kernel.h"

#include <string>

#include "kernels/executor/typed_step.h"
#include "kernels/launch_error.h"

namespace braid::executor {
namespace {

__global__ void planLaneKernel(executor::LaneExec* lanes, int32_t* statuses, const executor::LaunchImage image) {
  const executor::BlockGroup g;
  executor::takeLaunchImage(g, blockIdx.x, image, reinterpret_cast<uint64_t*>(lanes));
  executor::LaneExec& L = lanes[blockIdx.x];
  const executor::ExecStatus st = executor::runMixedLane(g, L);
  // A failed lane raised L.failure itself (the interpreter).
  if (threadIdx.x == 0 && statuses != nullptr) statuses[blockIdx.x] = int32_t(st);
}

Result launchFailure(cudaError_t err) {
  std::string msg = std::string("plan kernel failed to launch: ") + cudaGetErrorName(err) + " (" +
                    cudaGetErrorString(err) + ")";
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidPtx)
    msg += "; braid's kernels were not built for this GPU: rebuild with -DBRAID_CUDA_ARCHS=<its SM>";
  return Result(ncclUnhandledCudaError, msg);
}

// fp8 code exists only for sm_90+: refuse clearly rather than fail a step.
Result checkSm90(const PlanDevice& dev) {
  if (dev.major < 9)
    return Result(ncclInvalidArgument, "plan kernel: fp8 reductions need a GPU of compute capability 9.0 or "
                                       "newer; device " + std::to_string(dev.device) + " is " +
                                           std::to_string(dev.major) + "." + std::to_string(dev.minor));
  return Result::success();
}

bool isFp8(ncclDataType_t type) { return type == ncclFloat8e4m3 || type == ncclFloat8e5m2; }

}  // namespace

bool planKernelSupportsType(ncclDataType_t type) { return type >= 0 && type < ncclNumTypes; }

Result loadPlanKernel() {
  cudaFuncAttributes attr{};
  return kernels::loadResult("plan kernel", cudaFuncGetAttributes(&attr, planLaneKernel));
}

Result queryPlanDevice(uint32_t threadsPerLane, PlanDevice* out) {
  PlanDevice dev;
  int cooperative = 0;
  cudaError_t err = cudaGetDevice(&dev.device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, dev.device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&dev.major, cudaDevAttrComputeCapabilityMajor, dev.device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&dev.minor, cudaDevAttrComputeCapabilityMinor, dev.device);
  if (err != cudaSuccess)
    return Result(ncclUnhandledCudaError, std::string("plan kernel: querying the current device failed: ") +
                                              cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  dev.cooperative = cooperative != 0;
  BRAID_TRY(kernels::residentBlocks(reinterpret_cast<const void*>(&planLaneKernel), threadsPerLane,
                                    &dev.residentLanes));
  *out = dev;
  return Result::success();
}

Result launchPlanLanes(const PlanDevice& dev, executor::LaneExec* lanes, uint32_t nlanes, uint32_t threadsPerLane,
                       int32_t* statuses, bool anyFp8, cudaStream_t stream, const LaunchImage* image) {
  if (nlanes == 0) return Result::success();
  BRAID_TRY(kernels::checkThreadsPerLane(threadsPerLane));
  if (anyFp8) BRAID_TRY(checkSm90(dev));
  BRAID_TRY(kernels::refuseOnPendingError("plan kernel"));
  // The parameters are copied when the launch is enqueued: `image` may go now.
  static const LaunchImage kNoImage{};
  const LaunchImage& carried = image != nullptr ? *image : kNoImage;
  cudaError_t err;
  if (dev.cooperative) {
    void* args[] = {&lanes, &statuses, const_cast<LaunchImage*>(&carried)};
    err = cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(&planLaneKernel), dim3(nlanes),
                                      dim3(threadsPerLane), args, 0, stream);
  } else {
    planLaneKernel<<<nlanes, threadsPerLane, 0, stream>>>(lanes, statuses, carried);
    err = cudaGetLastError();
  }
  return err == cudaSuccess ? Result::success() : launchFailure(err);
}

Result launchPlanLanes(ncclDataType_t type, executor::LaneExec* lanes, uint32_t nlanes, uint32_t threadsPerLane,
                       int32_t* statuses, cudaStream_t stream) {
  if (!planKernelSupportsType(type))
    return Result(ncclInvalidArgument, "plan kernel: invalid datatype " + std::to_string(int(type)));
  if (nlanes == 0) return Result::success();
  BRAID_TRY(kernels::checkThreadsPerLane(threadsPerLane));  // before asking the device
  PlanDevice dev;
  BRAID_TRY(queryPlanDevice(threadsPerLane, &dev));
  return launchPlanLanes(dev, lanes, nlanes, threadsPerLane, statuses, isFp8(type), stream);
}

}  // namespace braid::executor
