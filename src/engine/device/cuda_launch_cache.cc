#include "engine/device/cuda_launch_cache.h"

#include "base/cuda_util.h"

namespace braid::device {

Result LaunchCache::start() {
  if (freeStream_ == nullptr) BRAID_CUDA_TRY(cudaStreamCreateWithFlags(&freeStream_, cudaStreamNonBlocking));
  return Result::success();
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
    return;
  }
  if (cudaFreeAsync(e.block, freeStream_) != cudaSuccess) cudaGetLastError();
  e.block = nullptr;
}

Result LaunchCache::blockFor(CachedLaunch* e, size_t bytes) {
  if (e->block != nullptr && e->blockBytes >= bytes) return Result::success();
  BRAID_TRY(start());
  drop(*e);
  BRAID_CUDA_TRY(cudaMallocAsync(reinterpret_cast<void**>(&e->block), bytes, e->stream));
  e->blockBytes = bytes;
  return Result::success();
}

void LaunchCache::release() {
  entries_.clear([this](CachedLaunch& e) { drop(e); });
  if (freeStream_ != nullptr) {
    cudaStreamDestroy(freeStream_);  // its frees still run
    freeStream_ = nullptr;
  }
}

}  // namespace braid::device
