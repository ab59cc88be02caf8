// Pointer classification of the CUDA build, and the checks a group of calls on
// device buffers must pass before it is staged.
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include "base/cuda_util.h"
#include "base/log.h"
#include "engine/comm.h"
#include "engine/device/cuda_capture.h"
#include "engine/device/device.h"
#include "engine/device/driver_probe.h"
#include "engine/device/launch_plan.h"
#include "engine/device/stage_span.h"

namespace braid::device {

namespace {

enum class CudaState { Unknown, Usable, Unusable };
std::atomic<CudaState> gState{CudaState::Unknown};
std::once_flag gDecided;

// Once per process: a driver and at least one device.
void decideCuda() {
  std::call_once(gDecided, [] {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) cudaGetLastError();
    const bool usable = err == cudaSuccess && n > 0;
    BRAID_INFO(kLogInit, "CUDA %s for device buffers (cudaGetDeviceCount: %s, %d devices)",
               usable ? "usable" : "not usable", cudaGetErrorName(err), n);
    gState.store(usable ? CudaState::Usable : CudaState::Unusable);
  });
}

// Whether a CUDA call is worth making for a pointer: never before the
// application loaded the driver, never after CUDA proved unusable.
bool cudaInUse() {
  const CudaState s = gState.load(std::memory_order_acquire);
  if (s == CudaState::Usable) return true;
  if (s == CudaState::Unusable || !cudaDriverLoaded()) return false;
  decideCuda();
  return gState.load() == CudaState::Usable;
}

bool attributesOf(const void* ptr, cudaPointerAttributes* attr) {
  if (ptr == nullptr || !cudaInUse()) return false;
  if (cudaPointerGetAttributes(attr, ptr) != cudaSuccess) {
    cudaGetLastError();  // not CUDA memory (older drivers): clear the error
    return false;
  }
  return attr->type == cudaMemoryTypeDevice || attr->type == cudaMemoryTypeManaged;
}

enum class Side { None, Host, Device };

// A buffer's side and, on the device side, its device.
struct Where {
  Side side = Side::None;
  int device = -1;
};

Where whereIs(const void* ptr) {
  if (ptr == nullptr) return {};
  cudaPointerAttributes attr{};
  if (!attributesOf(ptr, &attr)) return {Side::Host, -1};
  return {Side::Device, attr.device};
}

// The side of one call's buffers (None when it passes none that it uses),
// and their device into t.device: one attribute query (a driver call on
// every call's path) per distinct buffer.
Result taskSide(engine::Task& t, Side* side) {
  const StageSpan span = stageSpanOf(t, t.comm->rank, t.comm->nranks);
  const Where in = span.inBytes ? whereIs(t.sendbuff) : Where{};
  const Where out = !span.outBytes ? Where{}
                    : span.inBytes && t.recvbuff == t.sendbuff ? in
                                                               : whereIs(t.recvbuff);
  if (in.side != Side::None && out.side != Side::None && in.side != out.side)
    return fail(ncclInvalidArgument,
                "%s: rank %d's send buffer %p is %s memory but its receive buffer %p is %s memory; "
                "both must be device memory or both host memory",
                collectiveName(t.coll), t.comm->rank, t.sendbuff, in.side == Side::Device ? "device" : "host",
                t.recvbuff, out.side == Side::Device ? "device" : "host");
  if (in.side == Side::Device && out.side == Side::Device && in.device != out.device)
    return fail(ncclInvalidArgument, "%s: rank %d's send buffer %p is on device %d but its receive buffer %p is on "
                "device %d", collectiveName(t.coll), t.comm->rank, t.sendbuff, in.device, t.recvbuff, out.device);
  *side = in.side != Side::None ? in.side : out.side;
  t.device = in.side == Side::Device ? in.device : out.device;
  return Result::success();
}

// One host function per communicator submits a captured group's job at each
// launch of the graph, after the copies on its stream: a communicator's calls
// of one group are all captured, on one stream, or none is.
Result checkCaptures(std::vector<engine::Task>& tasks) {
  std::map<const ncclComm*, std::pair<cudaStream_t, bool>> first;  // stream, capturing
  for (engine::Task& t : tasks) {
    StreamCapture capture;
    BRAID_TRY(captureOf(t.stream, &capture).context(collectiveName(t.coll)));
    rememberCapture(capture, &t);  // the group's later steps ask no stream again
    const auto [it, added] = first.try_emplace(t.comm, t.stream, capture.active);
    if (added) continue;
    const auto [stream, active] = it->second;
    if (active != capture.active)
      return fail(ncclInvalidUsage,
                  "%s: rank %d's calls in this group are on streams %p and %p, of which one is capturing a "
                  "CUDA graph and the other is not; capture all of a communicator's calls of a group or none",
                  collectiveName(t.coll), t.comm->rank, static_cast<void*>(stream), static_cast<void*>(t.stream));
    if (active && stream != t.stream)
      return fail(ncclInvalidUsage,
                  "%s: rank %d's calls in this group are captured on two streams (%p and %p); a "
                  "communicator's captured calls of one group must be issued on one stream",
                  collectiveName(t.coll), t.comm->rank, static_cast<void*>(stream), static_cast<void*>(t.stream));
  }
  return Result::success();
}

}  // namespace

int currentGpuBusId() {
  if (!cudaDriverLoaded() || !deviceBuffersSupported()) return -1;
  int device = 0, domain = 0, bus = 0, slot = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&domain, cudaDevAttrPciDomainId, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&slot, cudaDevAttrPciDeviceId, device) != cudaSuccess) {
    cudaGetLastError();  // a query's failure is no error of the application's
    return -1;
  }
  return packGpuBusId(domain, bus, slot);
}

int currentGpuMultiprocessors() {
  if (!cudaDriverLoaded() || !deviceBuffersSupported()) return 0;
  int device = 0, sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return sms;
}

bool deviceBuffersSupported() {
  decideCuda();
  return gState.load() == CudaState::Usable;
}

bool isDeviceMemory(const void* ptr) {
  cudaPointerAttributes attr{};
  return attributesOf(ptr, &attr);
}

// Unlike the pointer checks, this may load the driver: ncclMemAlloc promises
// GPU memory wherever there is a GPU.
Result allocateCommMemory(void** ptr, size_t bytes) {
  decideCuda();
  if (gState.load() != CudaState::Usable) {
    if (posix_memalign(ptr, 4096, bytes) != 0)
      return fail(ncclSystemError, "ncclMemAlloc: cannot allocate %zu bytes of host memory", bytes);
    return Result::success();
  }
  const cudaError_t err = cudaMalloc(ptr, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();
    int dev = -1;
    cudaGetDevice(&dev);
    *ptr = nullptr;
    return fail(err == cudaErrorMemoryAllocation ? ncclSystemError : ncclUnhandledCudaError,
                "ncclMemAlloc: cudaMalloc of %zu bytes on CUDA device %d failed: %s", bytes, dev,
                cudaGetErrorString(err));
  }
  return Result::success();
}

Result freeCommMemory(void* ptr) {
  if (!isDeviceMemory(ptr)) {
    free(ptr);
    return Result::success();
  }
  const cudaError_t err = cudaFree(ptr);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return fail(ncclUnhandledCudaError, "ncclMemFree(%p): cudaFree failed: %s", ptr, cudaGetErrorString(err));
  }
  return Result::success();
}

Result classifyGroup(std::vector<engine::Task>& tasks, bool* device) {
  *device = false;
  if (!cudaInUse()) return Result::success();  // the host path's cost: one load
  // Pointer queries are no stream work: never an error under a graph capture.
  CaptureModeRelaxed relaxed;
  bool host = false;
  for (engine::Task& t : tasks) {
    Side side = Side::None;
    BRAID_TRY(taskSide(t, &side));
    *device |= side == Side::Device;
    host |= side == Side::Host;
  }
  if (!*device) {
    // Host buffers run at once on the CPU, which cannot read a device scalar.
    for (const engine::Task& t : tasks)
      if (t.deviceScalar)
        return fail(ncclInvalidArgument, "%s: the PreMulSum scalar is in device memory but the buffers are "
                    "host memory: use a host scalar (ncclScalarHostImmediate) with host buffers",
                    collectiveName(t.coll));
    return Result::success();
  }
  if (host)
    return fail(ncclInvalidArgument,
                "a group mixes calls on device buffers with calls on host buffers; issue them in "
                "separate groups");
  return checkCaptures(tasks);
}

}  // namespace braid::device
