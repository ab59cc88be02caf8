// The plan interpreter as a kernel: block b runs lane b.
#include "kernels/executor/plan_kernel.h"

#include <string>

namespace braid {
namespace kernels {
namespace {

template <class T>
__global__ void planLaneKernel(exec::LaneExec* lanes, int32_t* statuses) {
  const exec::BlockGroup g;
  const exec::ExecStatus st = exec::runLane<T>(g, lanes[blockIdx.x]);
  if (threadIdx.x == 0) statuses[blockIdx.x] = int32_t(st);
}

template <class T>
Result launchTyped(exec::LaneExec* lanes, uint32_t nlanes, uint32_t threads, int32_t* statuses,
                   cudaStream_t stream) {
  planLaneKernel<T><<<nlanes, threads, 0, stream>>>(lanes, statuses);
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return Result::success();
  return Result(ncclUnhandledCudaError, std::string("plan kernel failed to launch: ") + cudaGetErrorName(err) +
                                            " (" + cudaGetErrorString(err) + ")");
}

}  // namespace

bool planKernelSupportsType(ncclDataType_t type) { return type == ncclFloat32 || type == ncclInt32; }

Result launchPlanLanes(ncclDataType_t type, exec::LaneExec* lanes, uint32_t nlanes, uint32_t threadsPerLane,
                       int32_t* statuses, cudaStream_t stream) {
  if (nlanes == 0) return Result::success();
  if (threadsPerLane == 0 || threadsPerLane > 1024)
    return Result(ncclInvalidArgument, "plan kernel: threadsPerLane must be 1..1024");
  switch (type) {
    case ncclFloat32: return launchTyped<float>(lanes, nlanes, threadsPerLane, statuses, stream);
    case ncclInt32: return launchTyped<int32_t>(lanes, nlanes, threadsPerLane, statuses, stream);
    default:
      return Result(ncclInvalidArgument, std::string("plan kernel: no instantiation for ") + typeName(type) +
                                             " yet (float32 and int32 only)");
  }
}

}  // namespace kernels
}  // namespace braid
