#include "engine/device/cuda_launch_cache.h"

#include "base/cuda_util.h"

namespace braid::device {

namespace {

// A device block of `bytes` (rounded up to 8: `usable`) with a gate word
// after it (kernels/executor/launch_image.h), zeroed on `stream`: a gate not
// known to be zero is never handed out.
Result allocateGated(size_t bytes, cudaStream_t stream, char** block, uint64_t** gate, size_t* usable) {
  const size_t rounded = (bytes + sizeof(uint64_t) - 1) / sizeof(uint64_t) * sizeof(uint64_t);
  char* b = nullptr;
  BRAID_CUDA_TRY(cudaMallocAsync(reinterpret_cast<void**>(&b), rounded + sizeof(uint64_t), stream));
  uint64_t* g = reinterpret_cast<uint64_t*>(b + rounded);
  if (const cudaError_t err = cudaMemsetAsync(g, 0, sizeof(uint64_t), stream); err != cudaSuccess) {
    if (cudaFreeAsync(b, stream) != cudaSuccess) cudaGetLastError();
    return cudaFailure("cudaMemsetAsync", err);
  }
  *block = b;
  *gate = g;
  *usable = rounded;
  return Result::success();
}

}  // namespace

Result LaunchCache::start() {
  if (freeStream_ == nullptr) BRAID_CUDA_TRY(cudaStreamCreateWithFlags(&freeStream_, cudaStreamNonBlocking));
  if (allocStream_ == nullptr) BRAID_CUDA_TRY(cudaStreamCreateWithFlags(&allocStream_, cudaStreamNonBlocking));
  return Result::success();
}

Result LaunchCache::allocateNow(size_t bytes, void** out, uint64_t** gate) {
  BRAID_TRY(start());
  char* block = nullptr;
  size_t usable = 0;
  BRAID_TRY(allocateGated(bytes, allocStream_, &block, gate, &usable));
  // Only allocations and frees are on this stream: no wait for a kernel.
  if (const cudaError_t err = cudaStreamSynchronize(allocStream_); err != cudaSuccess) {
    if (cudaFreeAsync(block, allocStream_) != cudaSuccess) cudaGetLastError();
    *gate = nullptr;
    return cudaFailure("cudaStreamSynchronize", err);
  }
  *out = block;
  return Result::success();
}

bool LaunchCache::freeAllocated(void* block) {
  if (allocStream_ == nullptr) return false;
  if (cudaFreeAsync(block, allocStream_) != cudaSuccess) cudaGetLastError();
  return true;
}

CachedLaunch* LaunchCache::find(cudaStream_t stream, bool peerAccess, const std::vector<const engine::Task*>& tasks) {
  return entries_.find(tasks,
                       [&](const CachedLaunch& e) { return e.stream == stream && e.peerAccess == peerAccess; });
}

CachedLaunch* LaunchCache::insert(const std::vector<const engine::Task*>& tasks, std::unique_ptr<CachedLaunch> entry) {
  lanes::GroupKey key;
  for (const engine::Task* t : tasks) key.push_back(lanes::planKeyOf(*t));
  return entries_.insert(std::move(key), std::move(entry), [this](CachedLaunch& old) { drop(old); });
}

// The free waits on freeStream_ for the block's last launch: no host wait,
// and the user's stream may be gone by then.
void LaunchCache::drop(CachedLaunch& e) {
  if (e.block == nullptr) return;
  if (e.done && cudaStreamWaitEvent(freeStream_, e.done->get(), 0) != cudaSuccess) {
    cudaGetLastError();
    e.block = nullptr;  // leaked: no safe point to free it
    e.gate = nullptr;
    return;
  }
  if (cudaFreeAsync(e.block, freeStream_) != cudaSuccess) cudaGetLastError();
  e.block = nullptr;
  e.gate = nullptr;
}

Result LaunchCache::blockFor(CachedLaunch* e, size_t bytes) {
  if (e->block != nullptr && e->blockBytes >= bytes) return Result::success();
  BRAID_TRY(start());
  drop(*e);
  e->image.reset();
  e->blockBytes = 0;
  e->generation = 0;
  BRAID_TRY(allocateGated(bytes, e->stream, &e->block, &e->gate, &e->blockBytes));
  return Result::success();
}

void LaunchCache::release() {
  entries_.clear([this](CachedLaunch& e) { drop(e); });
  for (cudaStream_t* s : {&freeStream_, &allocStream_})
    if (*s != nullptr) {
      cudaStreamDestroy(*s);  // its frees still run
      *s = nullptr;
    }
}

}  // namespace braid::device
