// A CUDA block emulated by host threads, behind the same group interface the
// plan interpreter takes (kernels/executor/device_memory_model.h: tid, size,
// sync, agree), so that the kernel's lane code (every thread striding over
// elements and lines, barriers between phases, thread 0 publishing) runs on
// the CPU with several threads per lane, under ThreadSanitizer in CI.
//
// sync() is a barrier of the block's threads (__syncthreads); agree() follows
// BlockGroup::agree line by line: thread 0 clears a shared word, a barrier,
// every thread raises it to its code, a barrier, every thread reads it, a
// barrier before the next agree() may clear it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace emulation {

// A reusable barrier for a fixed number of threads (std::barrier is C++20).
class Barrier {
 public:
  explicit Barrier(uint32_t count) : count_(count) {}
  void arriveAndWait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  const uint32_t count_;
  uint32_t arrived_ = 0;
  uint64_t generation_ = 0;
};

// What a block's threads share: its barrier and agree()'s word (__shared__).
struct BlockShared {
  BlockShared(uint32_t threads, bool withBarriers = true) : barrier(threads), size(threads), barriers(withBarriers) {}
  Barrier barrier;
  std::atomic<int32_t> worst{0};
  const uint32_t size;
  // False only for the self-test that shows ThreadSanitizer catches a block
  // whose threads are not kept in step: sync() then does nothing.
  const bool barriers;
};

// One thread's view of its block.
class ThreadBlockGroup {
 public:
  static constexpr bool kDevice = true;  // a CUDA block's rules (kernels/executor)
  ThreadBlockGroup(BlockShared* block, uint32_t tid) : block_(block), tid_(tid) {}
  uint32_t tid() const { return tid_; }
  uint32_t size() const { return block_->size; }
  void sync() const {
    if (block_->barriers) block_->barrier.arriveAndWait();
  }
  int32_t agree(int32_t code) const {
    if (tid_ == 0) block_->worst.store(0, std::memory_order_relaxed);
    sync();
    if (code != 0) {
      int32_t seen = block_->worst.load(std::memory_order_relaxed);
      while (seen < code && !block_->worst.compare_exchange_weak(seen, code, std::memory_order_relaxed)) {
      }
    }
    sync();
    const int32_t r = block_->worst.load(std::memory_order_relaxed);
    sync();
    return r;
  }

 private:
  BlockShared* block_;
  uint32_t tid_;
};

}  // namespace emulation
