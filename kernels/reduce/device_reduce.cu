// Host launcher of the device reductions: dispatch on datatype and operator
// once, then launch one instantiation of reduceKernel. One kernel exists per
// (type, operator): 12 x 6, which keeps nvcc's time on 2 cores small.
#include "kernels/reduce/device_reduce.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/reduce/reduce_kernel.cuh"
#include "reduce/op_dispatch.h"

namespace braid {
namespace kernels {
namespace {

constexpr unsigned kThreads = 256;
// Enough blocks to fill an H100 many times over; larger counts loop in-kernel.
constexpr size_t kMaxBlocks = 4096;

Result cudaFailure(cudaError_t err, const RedOp& op) {
  std::string msg = std::string("device reduction of ") + typeName(op.type) +
                    " failed to launch: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")";
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidPtx) {
    msg += "; braid's kernels were not built for this GPU: rebuild with -DBRAID_CUDA_ARCHS=<its SM>";
  }
  return Result(ncclUnhandledCudaError, msg);
}

template <class T, class Fn>
Result launch(Fn fn, const RedOp& op, void* dst, const void* a, const void* b, size_t n,
              cudaStream_t stream) {
  const size_t blocks = std::min((n + kThreads - 1) / kThreads, kMaxBlocks);
  reduceKernel<T, Fn><<<unsigned(blocks), kThreads, 0, stream>>>(
      fn, static_cast<T*>(dst), static_cast<const T*>(a), static_cast<const T*>(b), n);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? Result::success() : cudaFailure(err, op);
}

template <class T>
Result launchTyped(const RedOp& op, void* dst, const void* a, const void* b, size_t n, bool pre,
                   bool post, cudaStream_t stream) {
  return reduce::withReduceFn<T>(op, pre, post, [&](auto fn) { return launch<T>(fn, op, dst, a, b, n, stream); });
}

// NCCL reduces fp8 only on sm_90 and newer; say so rather than fail oddly.
Result checkFp8Device(const RedOp& op) {
  int device = 0;
  int major = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (err != cudaSuccess) return cudaFailure(err, op);
  if (major < 9) {
    return Result(ncclInvalidUsage, std::string(typeName(op.type)) +
                                        " reductions need a GPU of compute capability 9.0 or newer; device " +
                                        std::to_string(device) + " is " + std::to_string(major) + ".x");
  }
  return Result::success();
}

}  // namespace

Result launchReduce(const RedOp& op, void* dst, const void* a, const void* b, size_t count,
                    bool bIsContribution, bool final, cudaStream_t stream) {
  if (count == 0) return Result::success();
  const bool pre = bIsContribution;
  const bool post = final;
  switch (op.type) {
    case ncclInt8: return launchTyped<int8_t>(op, dst, a, b, count, pre, post, stream);
    case ncclUint8: return launchTyped<uint8_t>(op, dst, a, b, count, pre, post, stream);
    case ncclInt32: return launchTyped<int32_t>(op, dst, a, b, count, pre, post, stream);
    case ncclUint32: return launchTyped<uint32_t>(op, dst, a, b, count, pre, post, stream);
    case ncclInt64: return launchTyped<int64_t>(op, dst, a, b, count, pre, post, stream);
    case ncclUint64: return launchTyped<uint64_t>(op, dst, a, b, count, pre, post, stream);
    case ncclFloat16: return launchTyped<Half>(op, dst, a, b, count, pre, post, stream);
    case ncclFloat32: return launchTyped<float>(op, dst, a, b, count, pre, post, stream);
    case ncclFloat64: return launchTyped<double>(op, dst, a, b, count, pre, post, stream);
    case ncclBfloat16: return launchTyped<BFloat16>(op, dst, a, b, count, pre, post, stream);
    case ncclFloat8e4m3:
      BRAID_TRY(checkFp8Device(op));
      return launchTyped<Fp8E4M3>(op, dst, a, b, count, pre, post, stream);
    case ncclFloat8e5m2:
      BRAID_TRY(checkFp8Device(op));
      return launchTyped<Fp8E5M2>(op, dst, a, b, count, pre, post, stream);
    default:
      return Result(ncclInvalidArgument,
                    "device reduction: invalid datatype " + std::to_string(int(op.type)));
  }
}

}  // namespace kernels
}  // namespace braid
