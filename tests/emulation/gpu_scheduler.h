// A GPU's block scheduler, emulated for the CPU tests: blocks (here: lanes)
// are dispatched strictly in issue order onto a fixed number of slots (what
// the device holds resident), and a dispatched block keeps its slot until it
// ends; nothing is preempted. Lanes that spin on a peer which is not yet
// dispatched, while they hold every slot, therefore wait for ever, as on a
// GPU: the emulation shows which launch orders can hang.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace emulation {

class GpuScheduler {
 public:
  explicit GpuScheduler(uint32_t slots) : free_(slots) {}
  // Blocks until block `position` (0, 1, ... in issue order) is dispatched:
  // every earlier block was, and a slot is free.
  void dispatch(size_t position) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return next_ == position && free_ > 0; });
    ++next_;
    --free_;
    cv_.notify_all();
  }
  // The block ended: its slot frees.
  void retire() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++free_;
    cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  size_t next_ = 0;
  uint32_t free_;
};

}  // namespace emulation
