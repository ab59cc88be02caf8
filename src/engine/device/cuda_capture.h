// CUDA stream capture (graphs) as the staged device path meets it: the capture
// mode of braid's own CUDA calls, the capture state of a user's stream, and
// state that a captured graph owns.
#pragma once

#include <cuda_runtime_api.h>

#include "base/result.h"
#include "engine/task.h"

namespace braid::device {

// Makes this thread's stream capture mode relaxed for a scope, and restores the
// caller's mode. While some thread captures in cudaStreamCaptureModeGlobal (or
// this one in ThreadLocal), "unsafe" calls such as cudaHostAlloc or
// cudaEventQuery fail and invalidate that capture unless the calling thread is
// relaxed; braid's calls that are not stream work (pinned allocations, queries
// of events recorded outside any capture) are safe for the capture, so they
// run relaxed.
class CaptureModeRelaxed {
 public:
  CaptureModeRelaxed();
  ~CaptureModeRelaxed();
  CaptureModeRelaxed(const CaptureModeRelaxed&) = delete;
  CaptureModeRelaxed& operator=(const CaptureModeRelaxed&) = delete;

 private:
  cudaStreamCaptureMode previous_ = cudaStreamCaptureModeRelaxed;
  bool restore_ = false;
};

// Sets this thread's mode to relaxed for good (a thread braid owns).
void relaxCaptureModeOfThisThread();

struct StreamCapture {
  bool active = false;
  unsigned long long id = 0;  // of the capture sequence, unique in the process
  cudaGraph_t graph = nullptr;  // being captured into (not owned)
};

// The capture state of `stream`. ncclInvalidUsage when its capture was
// invalidated by an earlier error, or when it is the legacy default stream while
// a blocking stream captures (the legacy stream cannot be captured).
Result captureOf(cudaStream_t stream, StreamCapture* out);
// The capture state of a call's stream as classifyGroup found it
// (Task::capture), or from the stream where it did not ask.
Result captureOf(const engine::Task& t, StreamCapture* out);
// Remembers `c` in the call (Task::capture).
void rememberCapture(const StreamCapture& c, engine::Task* t);

// Gives `graph` (being captured) a reference to `owned`: `release(owned)` runs
// once the graph, every executable graph instantiated from it and every launch
// of those are done with it, on a CUDA thread where no CUDA call is allowed.
// On failure `release(owned)` has run or will run, and the graph does not own it.
Result giveToGraph(cudaGraph_t graph, void* owned, cudaHostFn_t release);

}  // namespace braid::device
