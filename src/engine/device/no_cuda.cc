// The device path of a library built without CUDA: no device buffer is
// supported. A device pointer is still recognised (through the driver the
// application loaded, never initialising it) so that it fails with a clear
// error instead of a crash in a host memcpy.
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>

#include "engine/comm.h"
#include "engine/device/device.h"
#include "engine/device/driver_probe.h"

namespace braid::device {

class DeviceProxy {};

void DeviceProxyDeleter::operator()(DeviceProxy* proxy) const { delete proxy; }

namespace {

// cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr): the
// driver API's values, spelled out to need no CUDA header.
using PointerAttributeFn = int (*)(void* data, int attribute, unsigned long long ptr);
constexpr int kAttributeMemoryType = 2;
constexpr unsigned kMemoryTypeDevice = 2;

PointerAttributeFn driverPointerAttribute() {
  static const PointerAttributeFn fn = [] {
    void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    return handle ? reinterpret_cast<PointerAttributeFn>(dlsym(handle, "cuPointerGetAttribute")) : nullptr;
  }();
  return fn;
}

}  // namespace

bool deviceBuffersSupported() { return false; }

int currentGpuBusId() { return -1; }
int currentGpuMultiprocessors() { return 0; }

void prepareDeviceWork(ncclComm*) {}

bool isDeviceMemory(const void* ptr) {
  if (ptr == nullptr || !cudaDriverLoaded()) return false;
  const PointerAttributeFn fn = driverPointerAttribute();
  unsigned type = 0;
  // Not initialised (CUDA_ERROR_NOT_INITIALIZED) or not CUDA memory: host.
  return fn != nullptr && fn(&type, kAttributeMemoryType, reinterpret_cast<uintptr_t>(ptr)) == 0 &&
         type == kMemoryTypeDevice;
}

Result allocateCommMemory(void** ptr, size_t bytes) {
  if (posix_memalign(ptr, 4096, bytes) != 0)
    return fail(ncclSystemError, "ncclMemAlloc: cannot allocate %zu bytes of host memory", bytes);
  return Result::success();
}

Result freeCommMemory(void* ptr) {
  free(ptr);
  return Result::success();
}

Result classifyGroup(std::vector<engine::Task>& tasks, bool* device) {
  *device = false;
  // Without a driver no pointer is device memory: one look for the group, not
  // one (a dl_iterate_phdr, the loader's lock) per buffer.
  if (!cudaDriverLoaded()) return Result::success();
  for (const engine::Task& t : tasks) {
    if (t.count == 0) continue;
    for (const void* p : {t.sendbuff, static_cast<const void*>(t.recvbuff)}) {
      if (isDeviceMemory(p))
        return fail(ncclInvalidArgument,
                    "%s: buffer %p is CUDA device memory, but this braid was built without CUDA "
                    "(host buffers only; braidSupportsDeviceBuffers() returns 0)",
                    collectiveName(t.coll), p);
    }
  }
  return Result::success();
}

Result submitDeviceGroup(const std::vector<engine::Task>&, const StagedRunner&) {
  return fail(ncclInvalidArgument, "device buffers need a braid built with CUDA");
}

void drainDeviceWork(ncclComm*) {}

void pauseDeviceWork(ncclComm*) {}

void resumeDeviceWork(ncclComm*) {}

void abortDeviceWork(ncclComm*) {}

Result copyFromDeviceNow(void*, const void*, size_t, cudaStream_t, const char* what) {
  return fail(ncclInvalidArgument, "%s: device buffers, but this libbraid was built without CUDA", what);
}

Result copyToDeviceNow(void*, const void*, size_t, cudaStream_t) {
  return fail(ncclInvalidArgument, "device buffers, but this libbraid was built without CUDA");
}

}  // namespace braid::device
