#include "common/platform.h"

#include <dlfcn.h>
#include <nccl.h>
#include <unistd.h>

#include <climits>

namespace braid::bench {
namespace {

std::string objectPathOf(void* symbol) {
  Dl_info info{};
  if (symbol && dladdr(symbol, &info) && info.dli_fname) return info.dli_fname;
  return "?";
}

}  // namespace

int cudaDeviceCount() {
  // Kept loaded on purpose: unloading the driver after cuInit is not supported.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return 0;
  using InitFn = int (*)(unsigned int);
  using CountFn = int (*)(int*);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
  int n = 0;
  if (!init || !count || init(0) != 0 || count(&n) != 0) return 0;
  return n;
}

std::string loadedLibraryDescription() {
  // Compare objects, not just presence: with NVIDIA's NCCL preloaded, braid's
  // own symbol may still exist while nccl* resolve elsewhere.
  void* ncclSym = dlsym(RTLD_DEFAULT, "ncclGetVersion");
  void* braidSym = dlsym(RTLD_DEFAULT, "braidVersionString");
  const std::string ncclPath = objectPathOf(ncclSym);
  if (braidSym && objectPathOf(braidSym) == ncclPath) {
    auto versionString = reinterpret_cast<const char* (*)()>(braidSym);
    return std::string(versionString()) + " from " + ncclPath;
  }
  int version = 0;
  ncclGetVersion(&version);
  return "NCCL (not braid) version " + std::to_string(version) + " from " + ncclPath;
}

std::string hostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

}  // namespace braid::bench
