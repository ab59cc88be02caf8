#include "engine/device/cuda_staging.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "base/cuda_quiet_free.h"
#include "base/cuda_util.h"
#include "base/log.h"
#include "kernels/executor/fifo_view.h"

namespace braid::device {

namespace {

size_t sizeClass(size_t bytes) {
  size_t c = 4096;
  while (c < bytes) c <<= 1;
  return c;
}

}  // namespace

// The frees below wait while a kernel of braid's may be waiting (base/cuda_quiet_free.h).
StagingPool::~StagingPool() {
  for (char* p : all_) freeHostWhenQuiet(p);
}

Result StagingPool::reserve(size_t from, size_t upTo, size_t count) {
  for (size_t cls = sizeClass(from); cls <= upTo; cls <<= 1)
    for (size_t i = 0; i < count; ++i) {
      PinnedBlock b;
      BRAID_TRY(allocate(cls, &b));
      release(b);
    }
  return Result::success();
}

bool StagingPool::take(size_t bytes, PinnedBlock* out) {
  const size_t cls = sizeClass(std::max<size_t>(bytes, 1));
  std::lock_guard<std::mutex> lock(mu_);
  // Up to four times the size: small calls do not use up the large blocks.
  for (auto it = free_.lower_bound(cls); it != free_.end() && it->first <= 4 * cls; ++it) {
    if (it->second.empty()) continue;
    *out = {it->second.back(), it->first};
    it->second.pop_back();
    return true;
  }
  return false;
}

Result StagingPool::grow(size_t bytes, PinnedBlock* out) { return allocate(sizeClass(std::max<size_t>(bytes, 1)), out); }

Result StagingPool::allocate(size_t cls, PinnedBlock* out) {
  std::lock_guard<std::mutex> lock(mu_);
  void* p = nullptr;
  // Portable: any device's copies may use it, whatever device was current.
  const cudaError_t err = cudaHostAlloc(&p, cls, cudaHostAllocPortable);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return fail(ncclSystemError, "cannot allocate %zu bytes of pinned host memory to stage device buffers: %s",
                cls, cudaGetErrorString(err));
  }
  all_.push_back(static_cast<char*>(p));
  *out = {static_cast<char*>(p), cls};
  return Result::success();
}

void StagingPool::release(const PinnedBlock& block) {
  if (block.data == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  free_[block.bytes].push_back(block.data);
}

void StagingPool::abandon(const PinnedBlock& block) {
  if (block.data == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  all_.erase(std::remove(all_.begin(), all_.end(), block.data), all_.end());
  BRAID_WARN("device path: leaking a pinned staging block of %zu bytes that the GPU may still use", block.bytes);
}

void StagingPool::leak(const PinnedBlock& block) {
  if (block.data == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  all_.erase(std::remove(all_.begin(), all_.end(), block.data), all_.end());
}

void StagingPool::leakAll() {
  std::lock_guard<std::mutex> lock(mu_);
  all_.clear();
}

MappedWords::~MappedWords() {
  freeHostWhenQuiet(host_);
}

Result MappedWords::allocate() {
  void* p = nullptr;
  BRAID_CUDA_TRY(cudaHostAlloc(&p, sizeof(Words), cudaHostAllocMapped | cudaHostAllocPortable));
  host_ = static_cast<Words*>(p);
  host_->published = 0;
  host_->launchPublished = 0;
  host_->abort = 0;
  host_->laneFailure = 0;
  void* dev = nullptr;
  BRAID_CUDA_TRY(cudaHostGetDevicePointer(&dev, p, 0));
  auto* words = static_cast<Words*>(dev);
  devicePublished_ = &words->published;
  deviceLaunchPublished_ = &words->launchPublished;
  deviceAbort_ = &words->abort;
  deviceLaneFailure_ = &words->laneFailure;
  return Result::success();
}

void MappedWords::publish(uint64_t sequence) {
  // Every staged byte the host work wrote is visible before the word is.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  __atomic_store_n(&host_->published, sequence, __ATOMIC_SEQ_CST);
}

void MappedWords::publishLaunch(uint64_t ticket) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  __atomic_store_n(&host_->launchPublished, ticket, __ATOMIC_SEQ_CST);
}

uint64_t MappedWords::launchPublished() const {
  return host_ ? __atomic_load_n(&host_->launchPublished, __ATOMIC_SEQ_CST) : 0;
}

uint32_t MappedWords::takeLaneFailure() const {
  return host_ ? __atomic_exchange_n(&host_->laneFailure, 0u, __ATOMIC_SEQ_CST) : 0;
}

void MappedWords::setAbort() {
  if (host_) __atomic_store_n(&host_->abort, 1u, __ATOMIC_SEQ_CST);
}

bool MappedWords::aborted() const { return host_ && __atomic_load_n(&host_->abort, __ATOMIC_SEQ_CST) != 0; }

namespace {

constexpr size_t kSlotChunkBytes = 4096;

}  // namespace

MappedSlots::~MappedSlots() {
  for (void* chunk : chunks_) freeHostWhenQuiet(chunk);
}

Result MappedSlots::reserve() {
  std::lock_guard<std::mutex> lock(mu_);
  return free_.empty() ? addChunkLocked() : Result::success();
}

Result MappedSlots::addChunkLocked() {
  void* p = nullptr;
  BRAID_CUDA_TRY(cudaHostAlloc(&p, kSlotChunkBytes, cudaHostAllocMapped | cudaHostAllocPortable));
  void* dev = nullptr;
  const cudaError_t err = cudaHostGetDevicePointer(&dev, p, 0);
  if (err != cudaSuccess) {
    cudaFreeHost(p);
    return cudaFailure("cudaHostGetDevicePointer", err);
  }
  chunks_.push_back(p);
  auto* host = static_cast<uint64_t*>(p);
  auto* device = static_cast<const volatile uint64_t*>(dev);
  for (size_t i = kSlotChunkBytes / sizeof(uint64_t); i-- > 0;) free_.push_back({host + i, device + i});
  return Result::success();
}

Result MappedSlots::acquire(MappedSlot* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.empty()) BRAID_TRY(addChunkLocked());
  *out = free_.back();
  free_.pop_back();
  __atomic_store_n(out->host, uint64_t(0), __ATOMIC_SEQ_CST);
  return Result::success();
}

void MappedSlots::release(const MappedSlot& slot) {
  if (slot.host == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(slot);
}

void MappedSlots::leak() {
  std::lock_guard<std::mutex> lock(mu_);
  chunks_.clear();
  free_.clear();
}

MappedBeacons::~MappedBeacons() {
  freeHostWhenQuiet(block_);
}

Result MappedBeacons::allocate(size_t capacity) {
  char* p = nullptr;
  BRAID_TRY(allocateMappedAtHostAddress(capacity * sizeof(executor::LaneBeacon), "plan kernels' lane beacons", &p));
  block_ = p;
  capacity_ = capacity;
  slots_->busy.assign(capacity, false);
  return Result::success();
}

bool MappedBeacons::take(size_t count, std::shared_ptr<BeaconLease>* out) {
  std::lock_guard<std::mutex> lock(slots_->mu);
  std::vector<bool>& busy = slots_->busy;
  if (!block_ || count == 0 || count > capacity_) return false;
  for (size_t first = 0, run = 0; first + run < capacity_;) {
    if (busy[first + run]) {
      first += run + 1;
      run = 0;
      continue;
    }
    if (++run < count) continue;
    for (size_t i = first; i < first + count; ++i) busy[i] = true;
    memset(block_ + first * sizeof(executor::LaneBeacon), 0, count * sizeof(executor::LaneBeacon));
    *out = std::make_shared<BeaconLease>(slots_, BeaconRange{first, count});
    return true;
  }
  return false;
}

BeaconLease::~BeaconLease() {
  std::lock_guard<std::mutex> lock(slots_->mu);
  for (size_t i = range_.first; i < range_.first + range_.count && i < slots_->busy.size(); ++i)
    slots_->busy[i] = false;
}

void* MappedBeacons::at(size_t index) const { return block_ + index * sizeof(executor::LaneBeacon); }

}  // namespace braid::device
