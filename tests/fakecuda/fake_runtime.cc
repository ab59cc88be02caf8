// The CUDA runtime functions braid's device path and tests/gpu call, over the
// emulated device (fake_device.h), compiled against the toolkit's header so
// that every signature and enum value is CUDA's. Every call that may
// synchronise the device reports itself to the recorder first (recorder.cc
// lists them and says why). Stream capture and graphs: fake_graphs.cc, whose
// rules (fake_capture.h) the calls here check where CUDA does.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "fake_capture.h"
#include "fake_device.h"
#include "fakecuda.h"
#include "recorder.h"

namespace fakecuda {
namespace {

thread_local cudaError_t tLastError = cudaSuccess;
thread_local int tDevice = 0;
thread_local cudaStreamCaptureMode tCaptureMode = cudaStreamCaptureModeGlobal;

// Errors become the thread's last error, as in CUDA; "not ready" is a status.
cudaError_t result(cudaError_t err) {
  if (err != cudaSuccess && err != cudaErrorNotReady) tLastError = err;
  return err;
}

Device& dev() { return Device::get(); }

bool validDevice(int d) { return d >= 0 && d < dev().count(); }

// Whether [p, p + n) lies inside one registered allocation the device may address.
bool addressable(const void* p, size_t n) {
  uintptr_t base = 0;
  Allocation a;
  if (!dev().find(p, &base, &a)) return false;
  if (a.kind == MemKind::Pinned && !a.mapped) return false;
  return reinterpret_cast<uintptr_t>(p) + n <= base + a.bytes;
}

// A copy's device sides must be CUDA memory, whole: a wrong pointer or an
// overrun is an error here instead of silent corruption.
bool validCopy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  if (n == 0) return true;
  if (dst == nullptr || src == nullptr) return false;
  const bool srcDevice = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  const bool dstDevice = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  if (srcDevice && !addressable(src, n)) return false;
  if (dstDevice && !addressable(dst, n)) return false;
  return kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDefault;
}

// Whether a copy of `kind` reads or writes host memory that no CUDA call
// made (pageable: the driver stages it, recorder.cc).
bool throughPageable(void* dst, const void* src, cudaMemcpyKind kind) {
  const auto pageable = [](const void* p) {
    uintptr_t base = 0;
    Allocation a;
    return p != nullptr && !dev().find(p, &base, &a);
  };
  switch (kind) {
    case cudaMemcpyHostToDevice: return pageable(src);
    case cudaMemcpyDeviceToHost: return pageable(dst);
    case cudaMemcpyDeviceToDevice: return false;
    default: return pageable(src) || pageable(dst);  // host to host, or inferred
  }
}

struct Handles {
  std::mutex mu;
  std::set<Event*> events;
  std::vector<std::unique_ptr<Event>> owned;
  std::set<std::pair<int, int>> peerAccess;
};

Handles& handles() {
  static Handles h;
  return h;
}

Event* eventOf(cudaEvent_t e) {
  Handles& h = handles();
  std::lock_guard<std::mutex> lock(h.mu);
  auto* ev = reinterpret_cast<Event*>(e);
  return h.events.count(ev) ? ev : nullptr;
}

bool isLegacy(cudaStream_t s) { return s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread; }

// Synchronous work: on the legacy stream, and the host waits for it.
void runOnLegacyAndWait(std::function<void()> work) {
  bool known = false;
  Stream* legacy = dev().lookup(nullptr, &known);
  dev().enqueue(legacy, std::move(work));
  const Position end = legacy->end();
  end.stream->waitFor(end.count);
}

// Stream work: run in stream order, or captured (fake_capture.h).
cudaError_t enqueueOn(cudaStream_t stream, std::function<void()> work, std::vector<Position> after = {}) {
  bool known = false;
  Stream* s = dev().lookup(stream, &known);
  if (!known) return cudaErrorInvalidResourceHandle;
  cudaError_t captured = cudaSuccess;
  if (captureWork(s, work, after, &captured)) return captured;
  if (s->legacy()) {
    const cudaError_t err = legacyDuringCapture();
    if (err != cudaSuccess) return err;
  }
  dev().enqueue(s, std::move(work), std::move(after));
  return cudaSuccess;
}

// A free while tracked kernels run keeps the memory (the violation is
// recorded); otherwise it waits for the device, as CUDA's frees do.
cudaError_t freeMemory(void* p, MemKind kind) {
  if (p == nullptr) return cudaSuccess;
  const bool running = launchesOutstanding();
  if (!running) dev().synchronize();
  return dev().release(p, kind, running) ? cudaSuccess : cudaErrorInvalidValue;
}

constexpr uint32_t kIpcMagic = 0x46414b45;  // "FAKE"

struct IpcPayload {
  uint32_t magic;
  int32_t pid;
  uint64_t address;
  uint64_t bytes;
};
static_assert(sizeof(IpcPayload) <= sizeof(cudaIpcMemHandle_t), "fits a CUDA IPC handle");

}  // namespace

cudaError_t enqueue(cudaStream_t stream, Work work) { return result(enqueueOn(stream, std::move(work))); }

cudaError_t recordError(cudaError_t err) { return result(err); }

cudaStreamCaptureMode threadCaptureMode() { return tCaptureMode; }

bool streamCaptures(cudaStream_t stream) {
  bool known = false;
  Stream* s = dev().lookup(stream, &known);
  return known && streamCaptures(s);
}

void waitForStream(cudaStream_t stream) {
  bool known = false;
  Stream* s = dev().lookup(stream, &known);
  if (!known) return;
  const Position end = s->end();
  end.stream->waitFor(end.count);
}

bool deviceAddressable(const void* p, size_t bytes) { return addressable(p, bytes); }

void checkLaunchStream(cudaStream_t stream, const char* what) {
  if (!isLegacy(stream)) return;
  const std::string call = std::string(what) + " launched on the legacy default stream";
  checkSync(call.c_str(), __builtin_return_address(0), true);
}

std::atomic<uint64_t> pinnedAllocationCount{0};
std::atomic<uint64_t> streamAllocationCount{0};
std::atomic<uint64_t> pinnedFreeCount{0};
std::atomic<uint64_t> hostFunctionCount{0};
std::atomic<uint64_t> eventCreateCount{0};
std::atomic<uint64_t> eventRecordCount{0};
std::atomic<uint64_t> pointerQueryCount{0};
std::atomic<uint64_t> captureQueryCount{0};
std::atomic<uint64_t> streamWaitCount{0};
std::atomic<uint64_t> asyncCopyCount{0};
std::atomic<uint64_t> deviceQueryCount{0};  // attribute and occupancy queries
std::atomic<uint64_t> asyncCopyByteCount{0};

std::atomic<uint32_t> mostPlanLanes{0};
std::atomic<uint64_t> launchImageCount{0};
std::atomic<uint64_t> launchImageByteCount{0};

uint64_t pinnedAllocations() { return pinnedAllocationCount.load(); }

void notePlanLaunch(uint32_t lanes) {
  uint32_t seen = mostPlanLanes.load();
  while (lanes > seen && !mostPlanLanes.compare_exchange_weak(seen, lanes)) {
  }
}

uint32_t takeMostPlanLanes() { return mostPlanLanes.exchange(0); }

void noteLaunchImage(uint64_t bytes) {
  launchImageCount.fetch_add(1);
  launchImageByteCount.fetch_add(bytes);
}
uint64_t launchImages() { return launchImageCount.load(); }
uint64_t launchImageBytes() { return launchImageByteCount.load(); }
uint64_t streamOrderedAllocations() { return streamAllocationCount.load(); }
uint64_t pinnedFrees() { return pinnedFreeCount.load(); }
uint64_t hostFunctionsLaunched() { return hostFunctionCount.load(); }
uint64_t eventsCreated() { return eventCreateCount.load(); }
uint64_t eventRecords() { return eventRecordCount.load(); }
uint64_t pointerQueries() { return pointerQueryCount.load(); }
void noteCaptureQuery() { captureQueryCount.fetch_add(1); }
uint64_t deviceQueries() { return deviceQueryCount.load(); }
uint32_t blocksPerMultiprocessor(uint32_t threads) {
  return std::min<uint32_t>(32, uint32_t(kMaxThreadsPerMultiProcessor) / threads);
}
uint64_t captureQueries() { return captureQueryCount.load(); }
uint64_t streamWaits() { return streamWaitCount.load(); }
uint64_t asyncCopies() { return asyncCopyCount.load(); }
uint64_t asyncCopyBytes() { return asyncCopyByteCount.load(); }
uint64_t deviceBytesInUse() { return dev().bytesInUse(MemKind::Device); }

}  // namespace fakecuda

using fakecuda::checkSync;
using fakecuda::dev;
using fakecuda::result;

// A potentially unsafe call: recorded, and refused where a capture forbids it.
#define FAKECUDA_SYNC(name)                                                        \
  do {                                                                             \
    checkSync(name, __builtin_return_address(0));                                  \
    if (const cudaError_t unsafe = fakecuda::unsafeDuringCapture(); unsafe != cudaSuccess) \
      return result(unsafe);                                                       \
  } while (0)
// Work on the legacy default stream waits for kernels on blocking streams.
#define FAKECUDA_LEGACY(stream, name) \
  if (fakecuda::isLegacy(stream)) checkSync(name " on the legacy default stream", __builtin_return_address(0), true)

extern "C" {

// ---- errors and versions ----------------------------------------------------

cudaError_t CUDARTAPI cudaGetLastError(void) { return std::exchange(fakecuda::tLastError, cudaSuccess); }

cudaError_t CUDARTAPI cudaPeekAtLastError(void) { return fakecuda::tLastError; }

cudaError_t CUDARTAPI cudaDriverGetVersion(int* v) {
  if (v == nullptr) return result(cudaErrorInvalidValue);
  *v = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaRuntimeGetVersion(int* v) { return cudaDriverGetVersion(v); }

// ---- devices ----------------------------------------------------------------

cudaError_t CUDARTAPI cudaGetDeviceCount(int* count) {
  if (count == nullptr) return result(cudaErrorInvalidValue);
  *count = dev().count();
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetDevice(int* device) {
  if (device == nullptr) return result(cudaErrorInvalidValue);
  *device = fakecuda::tDevice;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaSetDevice(int device) {
  if (!fakecuda::validDevice(device)) return result(cudaErrorInvalidDevice);
  fakecuda::tDevice = device;
  return cudaSuccess;
}

// An H100 SXM as far as braid asks.
cudaError_t CUDARTAPI cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  fakecuda::deviceQueryCount.fetch_add(1);
  if (value == nullptr) return result(cudaErrorInvalidValue);
  if (!fakecuda::validDevice(device)) return result(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = fakecuda::kMultiProcessors; break;
    case cudaDevAttrMaxThreadsPerMultiProcessor: *value = fakecuda::kMaxThreadsPerMultiProcessor; break;
    case cudaDevAttrMaxThreadsPerBlock: *value = 1024; break;
    case cudaDevAttrCooperativeLaunch: *value = 1; break;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; break;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; break;
    case cudaDevAttrPciDomainId: *value = 0; break;
    case cudaDevAttrPciBusId: *value = 0x18 + 0x10 * device; break;
    case cudaDevAttrPciDeviceId: *value = 0; break;
    case cudaDevAttrUnifiedAddressing: *value = 1; break;
    case cudaDevAttrCanMapHostMemory: *value = 1; break;
    case cudaDevAttrConcurrentKernels: *value = 1; break;
    case cudaDevAttrWarpSize: *value = 32; break;
    case cudaDevAttrMemoryPoolsSupported: *value = 1; break;
    default: *value = 0; break;
  }
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* numBlocks, const void* func, int blockSize,
                                                                    size_t dynamicSMemSize) {
  fakecuda::deviceQueryCount.fetch_add(1);
  if (numBlocks == nullptr || func == nullptr || blockSize <= 0 || blockSize > 1024)
    return result(cudaErrorInvalidValue);
  *numBlocks = int(fakecuda::blocksPerMultiprocessor(uint32_t(blockSize)));
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceCanAccessPeer(int* canAccessPeer, int device, int peerDevice) {
  if (canAccessPeer == nullptr) return result(cudaErrorInvalidValue);
  if (!fakecuda::validDevice(device) || !fakecuda::validDevice(peerDevice)) return result(cudaErrorInvalidDevice);
  *canAccessPeer = device != peerDevice;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
  if (!fakecuda::validDevice(peerDevice) || peerDevice == fakecuda::tDevice) return result(cudaErrorInvalidDevice);
  fakecuda::Handles& h = fakecuda::handles();
  std::lock_guard<std::mutex> lock(h.mu);
  if (!h.peerAccess.insert({fakecuda::tDevice, peerDevice}).second) return result(cudaErrorPeerAccessAlreadyEnabled);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaDeviceSynchronize(void) {
  FAKECUDA_SYNC("cudaDeviceSynchronize");
  dev().synchronize();
  return cudaSuccess;
}

// ---- memory -----------------------------------------------------------------

cudaError_t CUDARTAPI cudaMalloc(void** devPtr, size_t size) {
  FAKECUDA_SYNC("cudaMalloc");
  if (devPtr == nullptr) return result(cudaErrorInvalidValue);
  *devPtr = dev().allocate(size, fakecuda::MemKind::Device, fakecuda::tDevice, true);
  return *devPtr ? cudaSuccess : result(cudaErrorMemoryAllocation);
}

cudaError_t CUDARTAPI cudaFree(void* devPtr) {
  FAKECUDA_SYNC("cudaFree");
  return result(fakecuda::freeMemory(devPtr, fakecuda::MemKind::Device));
}

// With unified addressing pinned memory is mapped at the same address, and
// portable to every device, whatever the flags.
cudaError_t CUDARTAPI cudaHostAlloc(void** pHost, size_t size, unsigned int flags) {
  FAKECUDA_SYNC("cudaHostAlloc");
  if (pHost == nullptr) return result(cudaErrorInvalidValue);
  fakecuda::pinnedAllocationCount.fetch_add(1);
  *pHost = dev().allocate(size, fakecuda::MemKind::Pinned, fakecuda::tDevice, true);
  return *pHost ? cudaSuccess : result(cudaErrorMemoryAllocation);
}

cudaError_t CUDARTAPI cudaMallocHost(void** ptr, size_t size) {
  FAKECUDA_SYNC("cudaMallocHost");
  if (ptr == nullptr) return result(cudaErrorInvalidValue);
  fakecuda::pinnedAllocationCount.fetch_add(1);
  *ptr = dev().allocate(size, fakecuda::MemKind::Pinned, fakecuda::tDevice, true);
  return *ptr ? cudaSuccess : result(cudaErrorMemoryAllocation);
}

cudaError_t CUDARTAPI cudaFreeHost(void* ptr) {
  FAKECUDA_SYNC("cudaFreeHost");
  fakecuda::pinnedFreeCount.fetch_add(1);
  return result(fakecuda::freeMemory(ptr, fakecuda::MemKind::Pinned));
}

cudaError_t CUDARTAPI cudaHostGetDevicePointer(void** pDevice, void* pHost, unsigned int flags) {
  uintptr_t base = 0;
  fakecuda::Allocation a;
  if (pDevice == nullptr || flags != 0 || !dev().find(pHost, &base, &a) || a.kind != fakecuda::MemKind::Pinned)
    return result(cudaErrorInvalidValue);
  *pDevice = pHost;
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaPointerGetAttributes(cudaPointerAttributes* attributes, const void* ptr) {
  if (attributes == nullptr) return result(cudaErrorInvalidValue);
  fakecuda::pointerQueryCount.fetch_add(1);
  *attributes = cudaPointerAttributes{};
  uintptr_t base = 0;
  fakecuda::Allocation a;
  if (!dev().find(ptr, &base, &a)) {
    attributes->type = cudaMemoryTypeUnregistered;
    attributes->device = -2;
    return cudaSuccess;
  }
  attributes->device = a.device;
  attributes->devicePointer = const_cast<void*>(ptr);
  if (a.kind == fakecuda::MemKind::Device) {
    attributes->type = cudaMemoryTypeDevice;
  } else {
    attributes->type = cudaMemoryTypeHost;
    attributes->hostPointer = const_cast<void*>(ptr);
  }
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream) {
  FAKECUDA_LEGACY(hStream, "cudaMallocAsync");
  fakecuda::streamAllocationCount.fetch_add(1);
  bool known = false;
  if (devPtr == nullptr) return result(cudaErrorInvalidValue);
  fakecuda::Stream* s = dev().lookup(hStream, &known);
  if (!known) return result(cudaErrorInvalidResourceHandle);
  if (const cudaError_t err = fakecuda::refuseOnCapturingStream(s); err != cudaSuccess) return result(err);
  *devPtr = dev().allocate(size, fakecuda::MemKind::Device, fakecuda::tDevice, true);
  return *devPtr ? cudaSuccess : result(cudaErrorMemoryAllocation);
}

cudaError_t CUDARTAPI cudaFreeAsync(void* devPtr, cudaStream_t hStream) {
  FAKECUDA_LEGACY(hStream, "cudaFreeAsync");
  uintptr_t base = 0;
  fakecuda::Allocation a;
  if (!dev().find(devPtr, &base, &a) || base != reinterpret_cast<uintptr_t>(devPtr) ||
      a.kind != fakecuda::MemKind::Device)
    return result(cudaErrorInvalidValue);
  bool known = false;
  fakecuda::Stream* s = dev().lookup(hStream, &known);
  if (known) {
    if (const cudaError_t err = fakecuda::refuseOnCapturingStream(s); err != cudaSuccess) return result(err);
  }
  return result(fakecuda::enqueueOn(hStream, [devPtr] { dev().release(devPtr, fakecuda::MemKind::Device, false); }));
}

cudaError_t CUDARTAPI cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  const bool deviceToDevice = kind == cudaMemcpyDeviceToDevice ||
                              (kind == cudaMemcpyDefault && fakecuda::addressable(dst, count) &&
                               fakecuda::addressable(src, count));
  checkSync("cudaMemcpy", __builtin_return_address(0), !deviceToDevice);
  if (fakecuda::throughPageable(dst, src, kind))
    checkSync("cudaMemcpy through pageable host memory", __builtin_return_address(0), false, true);
  if (const cudaError_t unsafe = fakecuda::unsafeDuringCapture(); unsafe != cudaSuccess) return result(unsafe);
  if (!fakecuda::validCopy(dst, src, count, kind)) return result(cudaErrorInvalidValue);
  fakecuda::runOnLegacyAndWait([=] { std::memmove(dst, src, count); });
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                                      cudaStream_t stream) {
  FAKECUDA_LEGACY(stream, "cudaMemcpyAsync");
  fakecuda::asyncCopyCount.fetch_add(1);
  fakecuda::asyncCopyByteCount.fetch_add(count);
  if (fakecuda::throughPageable(dst, src, kind))
    checkSync("cudaMemcpyAsync through pageable host memory", __builtin_return_address(0), false, true);
  if (!fakecuda::validCopy(dst, src, count, kind)) return result(cudaErrorInvalidValue);
  return result(fakecuda::enqueueOn(stream, [=] { std::memmove(dst, src, count); }));
}

// Rows of `width` bytes, each checked as a copy of its own.
cudaError_t CUDARTAPI cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                                        size_t height, cudaMemcpyKind kind, cudaStream_t stream) {
  FAKECUDA_LEGACY(stream, "cudaMemcpy2DAsync");
  fakecuda::asyncCopyCount.fetch_add(1);
  fakecuda::asyncCopyByteCount.fetch_add(width * height);
  if (fakecuda::throughPageable(dst, src, kind))
    checkSync("cudaMemcpy2DAsync through pageable host memory", __builtin_return_address(0), false, true);
  if (width > dpitch || width > spitch) return result(cudaErrorInvalidPitchValue);
  for (size_t row = 0; row < height; ++row)
    if (!fakecuda::validCopy(static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch,
                             width, kind))
      return result(cudaErrorInvalidValue);
  return result(fakecuda::enqueueOn(stream, [=] {
    for (size_t row = 0; row < height; ++row)
      std::memmove(static_cast<char*>(dst) + row * dpitch, static_cast<const char*>(src) + row * spitch, width);
  }));
}

cudaError_t CUDARTAPI cudaMemset(void* devPtr, int value, size_t count) {
  FAKECUDA_SYNC("cudaMemset");
  if (count > 0 && !fakecuda::addressable(devPtr, count)) return result(cudaErrorInvalidValue);
  fakecuda::runOnLegacyAndWait([=] { std::memset(devPtr, value, count); });
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaMemsetAsync(void* devPtr, int value, size_t count, cudaStream_t stream) {
  FAKECUDA_LEGACY(stream, "cudaMemsetAsync");
  if (count > 0 && !fakecuda::addressable(devPtr, count)) return result(cudaErrorInvalidValue);
  return result(fakecuda::enqueueOn(stream, [=] { std::memset(devPtr, value, count); }));
}

// ---- streams and events -----------------------------------------------------

cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags) {
  if (pStream == nullptr) return result(cudaErrorInvalidValue);
  const bool blocking = (flags & cudaStreamNonBlocking) == 0;
  *pStream = reinterpret_cast<cudaStream_t>(dev().createStream(fakecuda::tDevice, blocking));
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t* pStream) {
  return cudaStreamCreateWithFlags(pStream, cudaStreamDefault);
}

cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t stream) {
  bool known = false;
  fakecuda::Stream* s = dev().lookup(stream, &known);
  if (!known || fakecuda::isLegacy(stream)) return result(cudaErrorInvalidResourceHandle);
  dev().destroyStream(s);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamGetId(cudaStream_t stream, unsigned long long* streamId) {
  bool known = false;
  fakecuda::Stream* s = dev().lookup(stream, &known);
  if (!known || streamId == nullptr) return result(cudaErrorInvalidResourceHandle);
  *streamId = s->id();
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t stream) {
  bool known = false;
  fakecuda::Stream* s = dev().lookup(stream, &known);
  if (!known) return result(cudaErrorInvalidResourceHandle);
  if (const cudaError_t err = fakecuda::refuseOnCapturingStream(s); err != cudaSuccess) return result(err);
  if (const cudaError_t unsafe = fakecuda::unsafeDuringCapture(); unsafe != cudaSuccess) return result(unsafe);
  return s->idle() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t stream) {
  bool known = false;
  fakecuda::Stream* s = dev().lookup(stream, &known);
  if (!known) return result(cudaErrorInvalidResourceHandle);
  if (const cudaError_t err = fakecuda::refuseOnCapturingStream(s); err != cudaSuccess) return result(err);
  if (const cudaError_t unsafe = fakecuda::unsafeDuringCapture(); unsafe != cudaSuccess) return result(unsafe);
  const fakecuda::Position end = s->end();
  s->waitFor(end.count);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* userData) {
  FAKECUDA_LEGACY(stream, "cudaLaunchHostFunc");
  if (fn == nullptr) return result(cudaErrorInvalidValue);
  fakecuda::hostFunctionCount.fetch_add(1);
  return result(fakecuda::enqueueOn(stream, [fn, userData] { fn(userData); }));
}

cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  if (event == nullptr) return result(cudaErrorInvalidValue);
  fakecuda::eventCreateCount.fetch_add(1);
  fakecuda::Handles& h = fakecuda::handles();
  std::lock_guard<std::mutex> lock(h.mu);
  h.owned.push_back(std::make_unique<fakecuda::Event>());
  h.events.insert(h.owned.back().get());
  *event = reinterpret_cast<cudaEvent_t>(h.owned.back().get());
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }

// The Event object stays (a worker may still hold its position); only the
// handle dies.
cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t event) {
  fakecuda::Handles& h = fakecuda::handles();
  std::lock_guard<std::mutex> lock(h.mu);
  return h.events.erase(reinterpret_cast<fakecuda::Event*>(event)) ? cudaSuccess
                                                                     : result(cudaErrorInvalidResourceHandle);
}

cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  FAKECUDA_LEGACY(stream, "cudaEventRecord");
  fakecuda::Event* e = fakecuda::eventOf(event);
  bool known = false;
  fakecuda::Stream* s = dev().lookup(stream, &known);
  if (e == nullptr || !known) return result(cudaErrorInvalidResourceHandle);
  fakecuda::eventRecordCount.fetch_add(1);
  if (fakecuda::captureEventRecord(e, s)) return cudaSuccess;
  // On the legacy stream the event also follows the blocking streams' work.
  if (s->legacy()) {
    if (const cudaError_t err = fakecuda::legacyDuringCapture(); err != cudaSuccess) return result(err);
    dev().enqueue(s, nullptr);
  }
  e->at = s->end();
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event) {
  fakecuda::Event* e = fakecuda::eventOf(event);
  if (e == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (const cudaError_t err = fakecuda::capturedEventUse(e); err != cudaSuccess) return result(err);
  if (const cudaError_t unsafe = fakecuda::unsafeDuringCapture(); unsafe != cudaSuccess) return result(unsafe);
  return e->at.reached() ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t event) {
  fakecuda::Event* e = fakecuda::eventOf(event);
  if (e == nullptr) return result(cudaErrorInvalidResourceHandle);
  if (const cudaError_t err = fakecuda::capturedEventUse(e); err != cudaSuccess) return result(err);
  if (const cudaError_t unsafe = fakecuda::unsafeDuringCapture(); unsafe != cudaSuccess) return result(unsafe);
  if (e->at.stream) e->at.stream->waitFor(e->at.count);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags) {
  FAKECUDA_LEGACY(stream, "cudaStreamWaitEvent");
  fakecuda::streamWaitCount.fetch_add(1);
  fakecuda::Event* e = fakecuda::eventOf(event);
  if (e == nullptr) return result(cudaErrorInvalidResourceHandle);
  bool known = false;
  fakecuda::Stream* s = dev().lookup(stream, &known);
  if (!known) return result(cudaErrorInvalidResourceHandle);
  cudaError_t captured = cudaSuccess;
  if (fakecuda::captureEventWait(s, e, &captured)) return result(captured);
  return result(fakecuda::enqueueOn(stream, nullptr, {e->at}));
}

// ---- graph capture: the thread's mode (the rest: fake_graphs.cc) ---------------

cudaError_t CUDARTAPI cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (mode == nullptr) return result(cudaErrorInvalidValue);
  std::swap(*mode, fakecuda::tCaptureMode);
  return cudaSuccess;
}

// ---- IPC: handles are made; opening one in another process is not emulated ----

cudaError_t CUDARTAPI cudaIpcGetMemHandle(cudaIpcMemHandle_t* handle, void* devPtr) {
  uintptr_t base = 0;
  fakecuda::Allocation a;
  if (handle == nullptr || !dev().find(devPtr, &base, &a) || a.kind != fakecuda::MemKind::Device)
    return result(cudaErrorInvalidValue);
  const fakecuda::IpcPayload payload{fakecuda::kIpcMagic, int32_t(getpid()), uint64_t(base), uint64_t(a.bytes)};
  *handle = cudaIpcMemHandle_t{};
  std::memcpy(handle->reserved, &payload, sizeof payload);
  return cudaSuccess;
}

cudaError_t CUDARTAPI cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
  FAKECUDA_SYNC("cudaIpcOpenMemHandle");
  fakecuda::IpcPayload payload{};
  std::memcpy(&payload, handle.reserved, sizeof payload);
  if (devPtr == nullptr || payload.magic != fakecuda::kIpcMagic) return result(cudaErrorInvalidValue);
  // CUDA refuses a handle of the calling process; other processes' memory
  // is not emulated.
  return result(payload.pid == getpid() ? cudaErrorInvalidValue : cudaErrorNotSupported);
}

cudaError_t CUDARTAPI cudaIpcCloseMemHandle(void* devPtr) {
  FAKECUDA_SYNC("cudaIpcCloseMemHandle");
  return result(cudaErrorInvalidValue);
}

}  // extern "C"
