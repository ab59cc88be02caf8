#include "base/cuda_quiet_free.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "base/cuda_util.h"

namespace braid {

namespace {

enum class FreeKind { Host, Device, Ipc };

struct Deferred {
  FreeKind kind;
  void* p;
  int device;
};

// What the process's frees wait on. Never destroyed with CUDA calls: at exit
// the runtime may be gone, and kept memory goes with the process.
struct QuietFrees {
  std::shared_mutex gate;         // shared: launching; exclusive: freeing
  std::atomic<int64_t> count{0};  // braid kernels outstanding
  std::mutex keptMu;
  std::vector<Deferred> kept;
  std::atomic<size_t> nkept{0};
};

QuietFrees& quiet() {
  static QuietFrees q;
  return q;
}

void freeNow(const Deferred& d) {
  if (d.kind == FreeKind::Host) {
    if (cudaFreeHost(d.p) != cudaSuccess) cudaGetLastError();  // at exit the runtime may be gone
    return;
  }
  const DeviceGuard guard(d.device);
  const cudaError_t err = d.kind == FreeKind::Device ? cudaFree(d.p) : cudaIpcCloseMemHandle(d.p);
  if (err != cudaSuccess) cudaGetLastError();
}

// Never waits for a launching thread: under CUDA_LAUNCH_BLOCKING=1 a launch
// returns only when its kernel ends, which may take this thread's next call.
void release(const Deferred& d) {
  QuietFrees& q = quiet();
  std::unique_lock<std::shared_mutex> lock(q.gate, std::try_to_lock);
  if (lock.owns_lock() && q.count.load() == 0) return freeNow(d);
  std::lock_guard<std::mutex> kept(q.keptMu);
  q.kept.push_back(d);
  q.nkept.store(q.kept.size());
}

}  // namespace

std::shared_lock<std::shared_mutex> holdQuietFrees() { return std::shared_lock<std::shared_mutex>(quiet().gate); }

void addOutstandingKernels(int64_t delta) { quiet().count.fetch_add(delta); }

void freeHostWhenQuiet(void* p) {
  if (p != nullptr) release({FreeKind::Host, p, -1});
}

void freeDeviceWhenQuiet(void* p, int device) {
  if (p != nullptr) release({FreeKind::Device, p, device});
}

void closeIpcWhenQuiet(void* p, int device) {
  if (p != nullptr) release({FreeKind::Ipc, p, device});
}

void freeDeferredIfQuiet() {
  QuietFrees& q = quiet();
  if (q.nkept.load() == 0 || q.count.load() != 0) return;
  // Not while any thread launches (this one may: a staging block's wait).
  std::unique_lock<std::shared_mutex> lock(q.gate, std::try_to_lock);
  if (!lock.owns_lock() || q.count.load() != 0) return;
  std::vector<Deferred> kept;
  {
    std::lock_guard<std::mutex> k(q.keptMu);
    kept.swap(q.kept);
    q.nkept.store(0);
  }
  for (const Deferred& d : kept) freeNow(d);
}

size_t deferredFrees() { return quiet().nkept.load(); }

}  // namespace braid
