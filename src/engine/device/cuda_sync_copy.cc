// Copies between device buffers and host memory that return when done, for
// calls that run on the host over device buffers (reproducible mode).
#include <cuda_runtime_api.h>

#include "base/cuda_util.h"
#include "engine/device/cuda_capture.h"
#include "engine/device/device.h"

namespace braid::device {

namespace {

// The call runs now on the host: after the work queued on its stream, and
// never inside a graph capture (where nothing may wait for the stream).
Result waitForStream(cudaStream_t stream, const char* what) {
  StreamCapture capture;
  BRAID_TRY(captureOf(stream, &capture));
  if (capture.active)
    return fail(ncclInvalidUsage, "%s runs on the host over device buffers and cannot be captured in a CUDA "
                "graph: make the call outside the capture", what);
  BRAID_CUDA_TRY(cudaStreamSynchronize(stream));
  return Result::success();
}

}  // namespace

Result copyFromDeviceNow(void* host, const void* device, size_t bytes, cudaStream_t stream, const char* what) {
  BRAID_TRY(waitForStream(stream, what));
  if (bytes == 0) return Result::success();
  BRAID_CUDA_TRY(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream));
  BRAID_CUDA_TRY(cudaStreamSynchronize(stream));
  return Result::success();
}

Result copyToDeviceNow(void* device, const void* host, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return Result::success();
  BRAID_CUDA_TRY(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
  BRAID_CUDA_TRY(cudaStreamSynchronize(stream));
  return Result::success();
}

}  // namespace braid::device
