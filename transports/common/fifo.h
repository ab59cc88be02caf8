// The slot FIFO shared by the transports whose sender can write where the
// receiver reads (same process: heap; same host: POSIX shared memory).
//
// Region layout (offsets from the region's base):
//   0                 Control: geometry, `attached`, and the head/tail counters,
//                     each counter on its own cache line so the two sides never
//                     write the same line
//   kSizesOffset      uint64_t size[nslots]: bytes posted in each slot
//   dataOffset        nslots slots of `slotStride` bytes (4 KiB aligned area;
//                     slots 64-byte aligned, page aligned when >= 4 KiB) that
//                     reduction kernels may read and write directly
//
// head counts slots ever posted (written only by the sender), tail counts slots
// ever released (written only by the receiver). Slot k lives at k % nslots. The
// sender publishes a slot's bytes and size before head with release ordering;
// the receiver loads head with acquire ordering before touching the slot, and
// symmetrically for tail. Each side caches the other's counter and reloads it
// only when the cached value says full/empty, so the steady state touches the
// peer's cache line once per batch instead of once per call.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>

#include "base/result.h"

namespace braid {
namespace fifo {

constexpr size_t kCacheLine = 64;
constexpr size_t kPage = 4096;
constexpr uint64_t kMagic = 0x4f46494644494152ull;  // "RAIDFIFO"

static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "cross-process FIFO counters need lock-free 64-bit atomics");
static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "cross-process FIFO flags need lock-free 32-bit atomics");

struct Control {
  uint64_t magic;
  uint64_t slotBytes;
  uint64_t slotStride;
  uint64_t totalBytes;
  uint32_t nslots;
  std::atomic<uint32_t> attached;  // 1 once the sender has mapped the region
  alignas(kCacheLine) std::atomic<uint64_t> head;
  alignas(kCacheLine) std::atomic<uint64_t> tail;
};
static_assert(sizeof(Control) == 3 * kCacheLine, "Control layout changed");

constexpr size_t kSizesOffset = sizeof(Control);

constexpr size_t roundUp(size_t n, size_t align) { return (n + align - 1) / align * align; }

struct Layout {
  size_t slotBytes = 0;
  size_t slotStride = 0;
  uint32_t nslots = 0;
  size_t dataOffset = 0;
  size_t totalBytes = 0;
};

// Computes the layout for nslots x slotBytes; fails on zero or overflowing sizes.
Result makeLayout(size_t slotBytes, int nslots, Layout* out);

// Typed view over a region laid out as above. Does not own the memory.
class Region {
 public:
  Region() = default;
  Region(void* base, const Layout& layout)
      : base_(static_cast<uint8_t*>(base)), layout_(layout) {}

  // Constructs the control block and zeroes the sizes; called once by the side
  // that creates the memory, before the sender can see it.
  void initialize();
  // Checks that a region mapped by the other side has the expected geometry.
  Result validate() const;

  Control* control() const { return reinterpret_cast<Control*>(base_); }
  uint64_t* sizes() const { return reinterpret_cast<uint64_t*>(base_ + kSizesOffset); }
  uint8_t* slot(uint64_t seq) const {
    return base_ + layout_.dataOffset + (seq % layout_.nslots) * layout_.slotStride;
  }
  const Layout& layout() const { return layout_; }
  bool valid() const { return base_ != nullptr; }

 private:
  uint8_t* base_ = nullptr;
  Layout layout_;
};

// The sending half. Not thread-safe: one thread drives one connection.
class Sender {
 public:
  Sender() = default;
  explicit Sender(const Region& region)
      : region_(region), head_(region.control()->head.load(std::memory_order_relaxed)) {}

  void* acquire() {
    const uint32_t n = region_.layout().nslots;
    if (head_ - tailCache_ >= n) {
      tailCache_ = region_.control()->tail.load(std::memory_order_acquire);
      if (head_ - tailCache_ >= n) return nullptr;
    }
    return region_.slot(head_);
  }

  // Precondition: acquire() returned a buffer since the last post().
  void post(size_t bytes) {
    region_.sizes()[head_ % region_.layout().nslots] = bytes;
    region_.control()->head.store(++head_, std::memory_order_release);
  }

 private:
  Region region_;
  uint64_t head_ = 0;
  uint64_t tailCache_ = 0;
};

// The receiving half. Not thread-safe: one thread drives one connection.
class Receiver {
 public:
  Receiver() = default;
  explicit Receiver(const Region& region)
      : region_(region), tail_(region.control()->tail.load(std::memory_order_relaxed)),
        headCache_(tail_) {}

  const void* peek(size_t* bytes) {
    if (tail_ == headCache_) {
      headCache_ = region_.control()->head.load(std::memory_order_acquire);
      if (tail_ == headCache_) return nullptr;
    }
    uint64_t size = region_.sizes()[tail_ % region_.layout().nslots];
    // The size comes from another process's writes: never trust it to bound a read.
    if (size > region_.layout().slotBytes) {
      badSize_ = size;
      return nullptr;
    }
    *bytes = static_cast<size_t>(size);
    return region_.slot(tail_);
  }

  void release() {
    if (tail_ == headCache_) return;  // nothing peeked: ignore rather than corrupt tail
    region_.control()->tail.store(++tail_, std::memory_order_release);
  }

  // Non-zero once peek() found a slot size larger than slotBytes.
  uint64_t badSize() const { return badSize_; }

 private:
  Region region_;
  uint64_t tail_ = 0;
  uint64_t headCache_ = 0;
  uint64_t badSize_ = 0;
};

}  // namespace fifo
}  // namespace braid
