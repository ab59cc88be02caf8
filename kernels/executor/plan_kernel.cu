// The plan interpreter as a kernel: block b runs lane b. One instantiation per
// datatype (12); fp8 bodies exist only in sm_90+ code, as NCCL reduces fp8
// only there, and the host refuses to launch them on older devices.
#include "kernels/executor/plan_kernel.h"

#include <string>
#include <type_traits>

namespace braid {
namespace kernels {
namespace {

template <class T>
constexpr bool kNeedsSm90 = std::is_same<T, Fp8E4M3>::value || std::is_same<T, Fp8E5M2>::value;

template <class T>
__global__ void planLaneKernel(exec::LaneExec* lanes, int32_t* statuses) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  // Not instantiated below sm_90 (nvcc's time, and fp8 needs it): the host
  // never launches it there, so reaching this is a bug worth a trap.
  if constexpr (kNeedsSm90<T>) {
    __trap();
    return;
  } else
#endif
  {
    const exec::BlockGroup g;
    const exec::ExecStatus st = exec::runLane<T>(g, lanes[blockIdx.x]);
    if (threadIdx.x == 0) statuses[blockIdx.x] = int32_t(st);
  }
}

Result launchFailure(ncclDataType_t type, cudaError_t err) {
  std::string msg = std::string("plan kernel for ") + typeName(type) + " failed to launch: " +
                    cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidPtx)
    msg += "; braid's kernels were not built for this GPU: rebuild with -DBRAID_CUDA_ARCHS=<its SM>";
  return Result(ncclUnhandledCudaError, msg);
}

// fp8 kernels exist only for sm_90+: refuse clearly rather than trap.
Result checkSm90(ncclDataType_t type) {
  int device = 0;
  int major = 0;
  int minor = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  if (err != cudaSuccess)
    return Result(ncclUnhandledCudaError, std::string("plan kernel for ") + typeName(type) +
                                              ": querying the current device's compute capability failed: " +
                                              cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
  if (major < 9)
    return Result(ncclInvalidArgument, std::string("plan kernel: ") + typeName(type) +
                                           " needs a GPU of compute capability 9.0 or newer; device " +
                                           std::to_string(device) + " is " + std::to_string(major) + "." +
                                           std::to_string(minor));
  return Result::success();
}

template <class T>
Result launchTyped(ncclDataType_t type, exec::LaneExec* lanes, uint32_t nlanes, uint32_t threads,
                   int32_t* statuses, cudaStream_t stream) {
  if (kNeedsSm90<T>) BRAID_TRY(checkSm90(type));
  planLaneKernel<T><<<nlanes, threads, 0, stream>>>(lanes, statuses);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? Result::success() : launchFailure(type, err);
}

}  // namespace

bool planKernelSupportsType(ncclDataType_t type) { return type >= 0 && type < ncclNumTypes; }

Result launchPlanLanes(ncclDataType_t type, exec::LaneExec* lanes, uint32_t nlanes, uint32_t threadsPerLane,
                       int32_t* statuses, cudaStream_t stream) {
  if (nlanes == 0) return Result::success();
  if (threadsPerLane == 0 || threadsPerLane > 1024)
    return Result(ncclInvalidArgument, "plan kernel: threadsPerLane must be 1..1024");
  const auto go = [&](auto tag) {
    using T = decltype(tag);
    return launchTyped<T>(type, lanes, nlanes, threadsPerLane, statuses, stream);
  };
  switch (type) {
    case ncclInt8: return go(int8_t{});
    case ncclUint8: return go(uint8_t{});
    case ncclInt32: return go(int32_t{});
    case ncclUint32: return go(uint32_t{});
    case ncclInt64: return go(int64_t{});
    case ncclUint64: return go(uint64_t{});
    case ncclFloat16: return go(Half{});
    case ncclFloat32: return go(float{});
    case ncclFloat64: return go(double{});
    case ncclBfloat16: return go(BFloat16{});
    case ncclFloat8e4m3: return go(Fp8E4M3{});
    case ncclFloat8e5m2: return go(Fp8E5M2{});
    default:
      return Result(ncclInvalidArgument, "plan kernel: invalid datatype " + std::to_string(int(type)));
  }
}

}  // namespace kernels
}  // namespace braid
