#include "braid_api.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

namespace braid_torch {

namespace {

// Never dlclose'd: communicators and the bootstrap root threads of libbraid may
// outlive any Python object, up to process exit.
struct Loaded {
  std::mutex mutex;
  void* handle = nullptr;
  std::string path;
  std::string version;
  BraidApi api{};
  std::atomic<const BraidApi*> ready{nullptr};  // set once, read on every call
};

Loaded& loaded() {
  static Loaded l;
  return l;
}

template <typename Fn>
void bind(void* handle, const std::string& path, const char* name, Fn* out) {
  void* sym = dlsym(handle, name);
  if (sym == nullptr)
    throw std::runtime_error("braid_torch: " + path + " has no symbol " + name +
                             " (is it an older braid build?)");
  *out = reinterpret_cast<Fn>(sym);
}

// Null when the library lacks `name`.
template <typename Fn>
void bindOptional(void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
}

BraidApi bindAll(void* h, const std::string& p) {
  BraidApi a{};
  bind(h, p, "braidVersionString", &a.versionString);
  bind(h, p, "ncclGetUniqueId", &a.getUniqueId);
  bind(h, p, "ncclCommInitRank", &a.commInitRank);
  bind(h, p, "ncclCommDestroy", &a.commDestroy);
  bind(h, p, "ncclGetErrorString", &a.getErrorString);
  bind(h, p, "ncclGetLastError", &a.getLastError);
  bind(h, p, "ncclGroupStart", &a.groupStart);
  bind(h, p, "ncclGroupEnd", &a.groupEnd);
  bind(h, p, "ncclAllReduce", &a.allReduce);
  bind(h, p, "ncclBroadcast", &a.broadcast);
  bind(h, p, "ncclReduce", &a.reduce);
  bind(h, p, "ncclAllGather", &a.allGather);
  bind(h, p, "ncclReduceScatter", &a.reduceScatter);
  bind(h, p, "ncclSend", &a.send);
  bind(h, p, "ncclRecv", &a.recv);
  bind(h, p, "ncclRedOpCreatePreMulSum", &a.redOpCreatePreMulSum);
  bind(h, p, "ncclRedOpDestroy", &a.redOpDestroy);
  bindOptional(h, "braidSupportsDeviceBuffers", &a.supportsDeviceBuffers);
  bindOptional(h, "braidCommSetTimeout", &a.commSetTimeout);
  bindOptional(h, "braidGetPrivateUniqueId", &a.getPrivateUniqueId);
  bindOptional(h, "braidCommInitRankTimeout", &a.commInitRankTimeout);
  bindOptional(h, "braidCommSetReproducible", &a.commSetReproducible);
  bindOptional(h, "braidCommSetWireType", &a.commSetWireType);
  bindOptional(h, "braidWireRoundTrip", &a.wireRoundTrip);
  return a;
}

}  // namespace

std::string loadBraid(const std::string& path) {
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mutex);
  if (l.handle != nullptr) {
    if (path != l.path)
      throw std::runtime_error("braid_torch: libbraid is already loaded from " + l.path +
                               "; cannot switch to " + path + " in the same process");
    return l.version;
  }
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = dlerror();
    throw std::runtime_error("braid_torch: cannot load " + path + ": " + (why ? why : "unknown error") +
                             " (set BRAID_LIBRARY to the path of libbraid.so)");
  }
  if (dlsym(h, "braidVersionString") == nullptr) {
    dlclose(h);
    throw std::runtime_error("braid_torch: " + path +
                             " is not braid (no braidVersionString); NVIDIA's NCCL cannot run "
                             "collectives on CPU tensors. Set BRAID_LIBRARY to libbraid.so");
  }
  l.api = bindAll(h, path);
  l.handle = h;
  l.path = path;
  l.version = l.api.versionString();
  l.ready.store(&l.api, std::memory_order_release);
  return l.version;
}

const BraidApi& braid() {
  const BraidApi* api = loaded().ready.load(std::memory_order_acquire);
  if (api == nullptr)
    throw std::runtime_error("braid_torch: libbraid is not loaded (import braid_torch first)");
  return *api;
}

std::string loadedBraidPath() {
  Loaded& l = loaded();
  std::lock_guard<std::mutex> lock(l.mutex);
  return l.path;
}

std::map<std::string, bool> optionalSymbols() {
  const BraidApi& api = braid();
  return {{"braidSupportsDeviceBuffers", api.supportsDeviceBuffers != nullptr},
          {"braidCommSetTimeout", api.commSetTimeout != nullptr},
          {"braidGetPrivateUniqueId", api.getPrivateUniqueId != nullptr},
          {"braidCommInitRankTimeout", api.commInitRankTimeout != nullptr},
          {"braidCommSetReproducible", api.commSetReproducible != nullptr},
          {"braidCommSetWireType", api.commSetWireType != nullptr},
          {"braidWireRoundTrip", api.wireRoundTrip != nullptr}};
}

bool deviceBuffersSupported() {
  const char* allow = std::getenv("BRAID_TORCH_ALLOW_CUDA");
  if (allow != nullptr && std::string(allow) == "1") return true;
  const BraidApi& api = braid();
  return api.supportsDeviceBuffers != nullptr && api.supportsDeviceBuffers() != 0;
}

}  // namespace braid_torch
