// The C++ side of the fake CUDA runtime (libcuda.so.1 of tests/fakecuda), for
// the code that emulates kernels (fake_kernels.cc) and for the tests: work
// enqueued on an emulated stream, kernels the recorder tracks while they are
// outstanding, and the violations it recorded. The CUDA C API itself is
// fake_runtime.cc, compiled against the toolkit's cuda_runtime_api.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fakecuda {

// Work for a stream's worker thread, run in stream order.
using Work = std::function<void()>;

// Enqueues `work` on `stream` (nullptr / cudaStreamLegacy: the legacy default
// stream, with its implicit ordering against blocking streams). Fails like
// CUDA for an unknown or destroyed stream.
cudaError_t enqueue(cudaStream_t stream, Work work);
// Returns once everything enqueued on `stream` so far has run (a blocking
// launch's wait; no recorded CUDA call).
void waitForStream(cudaStream_t stream);
// Whether `stream` captures a graph (fake_capture.h): enqueued work is then
// a node, run at each launch of the graph.
bool streamCaptures(cudaStream_t stream);

// A kernel whose outstanding time (enqueued, not finished) makes every
// synchronising CUDA call a violation: braid's plan kernels and stream-wait
// kernels. `what` names it in reports.
// A kernel launched on the legacy default stream waits for every blocking
// stream: reported like a synchronising call; call it before trackLaunch.
void checkLaunchStream(cudaStream_t stream, const char* what);
uint64_t trackLaunch(const std::string& what, cudaStream_t stream);
void finishLaunch(uint64_t id);
// How many tracked kernels were launched so far in this process.
uint64_t launchesTracked();

// How many blocks of pinned memory (cudaHostAlloc, cudaMallocHost) were made
// so far in this process.
uint64_t pinnedAllocations();
uint64_t pinnedFrees();  // cudaFreeHost calls
// The most lanes (blocks) of one plan-kernel launch since the last take.
void notePlanLaunch(uint32_t lanes);
uint32_t takeMostPlanLanes();
// Plan-kernel launches that carried their lane image in their parameters
// (kernels/executor/launch_image.h), and the image bytes they carried.
void noteLaunchImage(uint64_t bytes);
uint64_t launchImages();
uint64_t launchImageBytes();

// How many cudaMallocAsync and cudaLaunchHostFunc calls were made so far.
uint64_t streamOrderedAllocations();
uint64_t hostFunctionsLaunched();
// How many events were made (cudaEventCreate*) and recorded so far.
uint64_t eventsCreated();
uint64_t eventRecords();
// How many cudaPointerGetAttributes, cudaStreamWaitEvent and cudaMemcpyAsync
// (or 2D) calls were made so far.
uint64_t pointerQueries();
// cudaStreamGetCaptureInfo (and cudaStreamIsCapturing) calls so far.
void noteCaptureQuery();
uint64_t captureQueries();
// cudaDeviceGetAttribute and occupancy calls so far.
uint64_t deviceQueries();
uint64_t streamWaits();
uint64_t asyncCopies();
// Bytes those copies moved.
uint64_t asyncCopyBytes();
// Bytes of device memory allocated and not yet freed (cudaMalloc, cudaMallocAsync).
uint64_t deviceBytesInUse();

// Whether `p` .. `p + bytes` lies in memory the emulated device may address
// (device memory, mapped or portable pinned memory).
bool deviceAddressable(const void* p, size_t bytes);

// The emulated device's limits that launches check.
constexpr int kMultiProcessors = 132;
constexpr int kMaxThreadsPerMultiProcessor = 2048;
// Blocks of `threads` (1..1024) threads a multiprocessor holds at once.
uint32_t blocksPerMultiprocessor(uint32_t threads);

// One synchronising call made while tracked kernels were outstanding.
struct Violation {
  std::string call;
  std::string caller;       // the object that made the call: braid or the application
  std::string outstanding;  // the kernels, one per line
  std::string backtrace;
  // Not a failure: made while an ExpectViolations lived, or by the
  // application without BRAID_FAKECUDA_APP_CALLS=fail (recorder.cc).
  bool expected = false;
};

std::vector<Violation> violations();
size_t violationCount();

// Called (outside the recorder's lock) for each violation as it happens; the
// gtest glue (recorder_gtest.cc) fails the running test from it.
void setViolationHook(std::function<void(const Violation&)> hook);

// While one lives, violations are recorded but neither reported to the hook
// nor fatal under BRAID_FAKECUDA_STRICT: for the recorder's own self-test.
class ExpectViolations {
 public:
  ExpectViolations();
  ~ExpectViolations();
  ExpectViolations(const ExpectViolations&) = delete;
  ExpectViolations& operator=(const ExpectViolations&) = delete;
};

}  // namespace fakecuda
