// Stream capture (CUDA graphs) of the fake runtime, as fake_runtime.cc's calls
// meet it (the capture and graph API itself is fake_graphs.cc). While a stream
// captures, the work enqueued on it becomes a node of the capture's graph
// instead of running: each node depends on the last ones captured on its
// stream, and on what its stream waited for (an event recorded in the same
// capture joins another stream's nodes, and a stream that waits on such an
// event joins the capture). A graph launch runs each captured stream's nodes
// on a stream of its own, in their order, so branches run at once as on a
// GPU. CUDA's rules that the emulation enforces, each as CUDA fails it:
//   - synchronising or querying a capturing stream, or an event recorded in
//     a capture: cudaErrorStreamCaptureUnsupported, the capture invalidated;
//   - a potentially unsafe call (one the recorder counts as synchronising:
//     allocations, frees, synchronous copies, cudaDeviceSynchronize; and
//     queries and synchronisations of streams and events) by a thread whose
//     mode forbids it (cudaThreadExchangeStreamCaptureMode:
//     relaxed never, thread-local during its own capture, global also during
//     another thread's global capture): cudaErrorStreamCaptureUnsupported;
//   - work on the legacy stream while a blocking stream captures:
//     cudaErrorStreamCaptureImplicit;
//   - a capturing stream waiting on an event of no capture (done or not) or
//     of another one: cudaErrorStreamCaptureIsolation;
//   - ending a capture a joined stream has not rejoined:
//     cudaErrorStreamCaptureUnjoined; ending it from another thread (global
//     and thread-local modes): cudaErrorStreamCaptureWrongThread;
//   - stream-ordered allocation in a capture (memory nodes) is not emulated:
//     cudaErrorStreamCaptureUnsupported.
// An invalidated capture fails every later captured call and its end
// (cudaErrorStreamCaptureInvalidated).
#pragma once

#include <cuda_runtime_api.h>

#include <vector>

#include "fake_device.h"
#include "fakecuda.h"

namespace fakecuda {

// Implemented in fake_runtime.cc: the thread's last error, and its capture
// interaction mode.
cudaError_t recordError(cudaError_t err);
cudaStreamCaptureMode threadCaptureMode();

// True when `s` captures: then `work` became a node, or *err says why not
// (a dependency `after` on work outside the capture is an isolation error).
bool captureWork(Stream* s, Work work, const std::vector<Position>& after, cudaError_t* err);
bool streamCaptures(Stream* s);
// A call CUDA refuses on a capturing stream (synchronising or querying it,
// and here stream-ordered allocation, whose memory nodes are not emulated):
// the capture invalidated and cudaErrorStreamCaptureUnsupported; success
// when `s` does not capture.
cudaError_t refuseOnCapturingStream(Stream* s);
// Work on the legacy stream: the error while a blocking stream captures.
cudaError_t legacyDuringCapture();
// A potentially unsafe call by this thread.
cudaError_t unsafeDuringCapture();
// An event recorded on a capturing stream becomes the capture's (true); a
// record outside any capture makes it an ordinary event again (false).
bool captureEventRecord(Event* e, Stream* s);
// A wait of `s` on `e`: true when capture decides it (*err set).
bool captureEventWait(Stream* s, Event* e, cudaError_t* err);
// A query or synchronisation of `e`: an error when a capture recorded it.
cudaError_t capturedEventUse(Event* e);

}  // namespace fakecuda
