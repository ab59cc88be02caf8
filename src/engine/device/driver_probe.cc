#include "engine/device/driver_probe.h"

#include <dlfcn.h>
#include <link.h>

#include <atomic>

namespace braid::device {

namespace {

// glibc counts every library load; the first object reports the count.
int readLoadCount(dl_phdr_info* info, size_t, void* out) {
  *static_cast<unsigned long long*>(out) = info->dlpi_adds;
  return 1;
}

}  // namespace

bool cudaDriverLoaded() {
  static std::atomic<bool> loaded{false};
  static std::atomic<unsigned long long> checkedAt{~0ull};
  if (loaded.load(std::memory_order_acquire)) return true;
  unsigned long long adds = 0;
  dl_iterate_phdr(readLoadCount, &adds);
  // A failed dlopen costs tens of microseconds: only after a load changed the
  // list. The count is recorded only once a look found no driver, so that a
  // thread asking while another looks does not take "being looked at" for
  // "absent" (ranks initialised on several threads at once did).
  if (checkedAt.load(std::memory_order_acquire) == adds) return false;
  void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) {
    checkedAt.store(adds, std::memory_order_release);
    return false;
  }
  dlclose(handle);  // drops the reference NOLOAD took; the library stays
  loaded.store(true, std::memory_order_release);
  return true;
}

}  // namespace braid::device
