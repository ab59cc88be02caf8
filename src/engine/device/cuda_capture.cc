#include "engine/device/cuda_capture.h"

#include "base/cuda_util.h"

namespace braid::device {

CaptureModeRelaxed::CaptureModeRelaxed() {
  previous_ = cudaStreamCaptureModeRelaxed;
  restore_ = cudaThreadExchangeStreamCaptureMode(&previous_) == cudaSuccess;
  if (!restore_) cudaGetLastError();
}

CaptureModeRelaxed::~CaptureModeRelaxed() {
  if (restore_ && cudaThreadExchangeStreamCaptureMode(&previous_) != cudaSuccess) cudaGetLastError();
}

void relaxCaptureModeOfThisThread() {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) cudaGetLastError();
}

Result captureOf(cudaStream_t stream, StreamCapture* out) {
  *out = StreamCapture();
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  unsigned long long id = 0;
  // CUDA 13 folded cudaStreamGetCaptureInfo_v2 (11.3 to 12.x) into the plain name.
#if CUDART_VERSION >= 13000
  const cudaError_t err = cudaStreamGetCaptureInfo(stream, &status, &id, &graph);
#else
  const cudaError_t err = cudaStreamGetCaptureInfo_v2(stream, &status, &id, &graph);
#endif
  if (err == cudaErrorStreamCaptureImplicit) {
    cudaGetLastError();
    return fail(ncclInvalidUsage,
                "stream %p is the legacy default stream while a blocking stream is capturing a CUDA graph; "
                "the legacy stream cannot be captured: use a capturing or a non-blocking stream",
                static_cast<void*>(stream));
  }
  if (err != cudaSuccess) return cudaFailure("cudaStreamGetCaptureInfo", err);
  if (status == cudaStreamCaptureStatusInvalidated)
    return fail(ncclInvalidUsage,
                "stream %p's CUDA graph capture was invalidated by an earlier error; end it "
                "(cudaStreamEndCapture) before using the stream", static_cast<void*>(stream));
  if (status != cudaStreamCaptureStatusActive) return Result::success();
  out->active = true;
  out->id = id;
  out->graph = graph;
  return Result::success();
}

Result captureOf(const engine::Task& t, StreamCapture* out) {
  if (!t.capture.known) return captureOf(t.stream, out);
  out->active = t.capture.active;
  out->id = t.capture.id;
  out->graph = static_cast<cudaGraph_t>(t.capture.graph);
  return Result::success();
}

void rememberCapture(const StreamCapture& c, engine::Task* t) {
  t->capture.known = true;
  t->capture.active = c.active;
  t->capture.id = c.id;
  t->capture.graph = c.graph;
}

Result giveToGraph(cudaGraph_t graph, void* owned, cudaHostFn_t release) {
  cudaUserObject_t object = nullptr;
  cudaError_t err = cudaUserObjectCreate(&object, owned, release, 1, cudaUserObjectNoDestructorSync);
  if (err != cudaSuccess) {
    cudaGetLastError();
    release(owned);
    return cudaFailure("cudaUserObjectCreate", err);
  }
  // The caller's reference moves to the graph; instantiated graphs take their own.
  err = cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove);
  if (err != cudaSuccess) {
    cudaGetLastError();
    if (cudaUserObjectRelease(object, 1) != cudaSuccess) cudaGetLastError();  // runs `release`
    return cudaFailure("cudaGraphRetainUserObject", err);
  }
  return Result::success();
}

}  // namespace braid::device
