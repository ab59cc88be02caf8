#include "engine/device/cuda_launch_cache.h"

#include "base/cuda_util.h"

namespace braid::device {

Result LaunchCache::start() {
  if (freeStream_ == nullptr) BRAID_CUDA_TRY(cudaStreamCreateWithFlags(&freeStream_, cudaStreamNonBlocking));
  if (allocStream_ == nullptr) BRAID_CUDA_TRY(cudaStreamCreateWithFlags(&allocStream_, cudaStreamNonBlocking));
  return Result::success();
}

Result LaunchCache::allocateNow(size_t bytes, void** out, uint64_t** gate) {
  BRAID_TRY(start());
  const size_t usable = (bytes + sizeof(uint64_t) - 1) / sizeof(uint64_t) * sizeof(uint64_t);
  BRAID_CUDA_TRY(cudaMallocAsync(out, usable + sizeof(uint64_t), allocStream_));
  *gate = reinterpret_cast<uint64_t*>(static_cast<char*>(*out) + usable);
  // Only allocations and frees are on this stream: no wait for a kernel.
  cudaError_t err = cudaMemsetAsync(*gate, 0, sizeof(uint64_t), allocStream_);
  const char* what = "cudaMemsetAsync";
  if (err == cudaSuccess) {
    err = cudaStreamSynchronize(allocStream_);
    what = "cudaStreamSynchronize";
  }
  if (err != cudaSuccess) {
    if (cudaFreeAsync(*out, allocStream_) != cudaSuccess) cudaGetLastError();
    *out = nullptr;
    *gate = nullptr;
    return cudaFailure(what, err);
  }
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
  const size_t usable = (bytes + sizeof(uint64_t) - 1) / sizeof(uint64_t) * sizeof(uint64_t);
  BRAID_CUDA_TRY(cudaMallocAsync(reinterpret_cast<void**>(&e->block), usable + sizeof(uint64_t), e->stream));
  e->blockBytes = usable;
  e->gate = reinterpret_cast<uint64_t*>(e->block + usable);
  e->generation = 0;
  const cudaError_t err = cudaMemsetAsync(e->gate, 0, sizeof(uint64_t), e->stream);
  if (err != cudaSuccess) {
    // A gate not known to be zero must never be used.
    if (cudaFreeAsync(e->block, e->stream) != cudaSuccess) cudaGetLastError();
    e->block = nullptr;
    e->gate = nullptr;
    e->blockBytes = 0;
    return cudaFailure("cudaMemsetAsync", err);
  }
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
