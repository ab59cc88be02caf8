#include "engine/device/cuda_launch_cache.h"

#include <algorithm>

#include "base/cuda_util.h"

namespace braid::device {

namespace {

bool sameCalls(const lanes::GroupKey& key, const std::vector<const engine::Task*>& tasks) {
  if (key.size() != tasks.size()) return false;
  for (size_t i = 0; i < key.size(); ++i)
    if (!(key[i] == lanes::planKeyOf(*tasks[i]))) return false;
  return true;
}

}  // namespace

LaunchCache::~LaunchCache() {
  // Not released: a kernel may still use the blocks; the stream goes with them.
  for (auto& e : entries_) e->block = nullptr;
}

Result LaunchCache::start() {
  if (freeStream_ == nullptr) BRAID_CUDA_TRY(cudaStreamCreateWithFlags(&freeStream_, cudaStreamNonBlocking));
  return Result::success();
}

CachedLaunch* LaunchCache::find(cudaStream_t stream, const std::vector<const engine::Task*>& tasks) {
  for (auto& e : entries_)
    if (e->stream == stream && sameCalls(e->key, tasks)) {
      e->lastUse = ++clock_;
      return e.get();
    }
  return nullptr;
}

CachedLaunch* LaunchCache::insert(std::unique_ptr<CachedLaunch> entry) {
  entry->lastUse = ++clock_;
  if (entries_.size() >= kEntries) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const auto& a, const auto& b) { return a->lastUse < b->lastUse; });
    drop(**oldest);
    *oldest = std::move(entry);
    return oldest->get();
  }
  entries_.push_back(std::move(entry));
  return entries_.back().get();
}

// The free waits on freeStream_ for the block's last launch: no host wait,
// and the user's stream may be gone by then.
void LaunchCache::drop(CachedLaunch& e) {
  if (e.block == nullptr) return;
  if (e.launched && cudaStreamWaitEvent(freeStream_, e.done.get(), 0) != cudaSuccess) {
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
  for (auto& e : entries_) drop(*e);
  entries_.clear();
  if (freeStream_ != nullptr) {
    cudaStreamDestroy(freeStream_);  // its frees still run
    freeStream_ = nullptr;
  }
}

}  // namespace braid::device
