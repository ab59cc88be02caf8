// The slot FIFO shared by the transports whose sender can write where the
// receiver reads (same process: heap; same host: POSIX shared memory).
//
// Region layout (offsets from the region's base):
//   0                 Control: geometry, `attached`, and the tail counter on a
//                     cache line of its own
//   kDescOffset       SlotDesc desc[nslots], one cache line per slot: the
//                     slot's sequence number, its size, and up to kInlineBytes
//                     of its payload
//   dataOffset        nslots slots of `slotStride` bytes (4 KiB aligned area;
//                     slots 64-byte aligned, page aligned when >= 4 KiB) that
//                     reduction kernels may read and write directly
//
// The sender posts the k-th message (k = 1, 2, ...) into slot (k-1) % nslots:
// it writes the bytes, the size and, for a small message, a copy of the bytes
// into the descriptor, and then stores k into the descriptor's seq with release
// ordering. The receiver polls the descriptor of the slot it expects next; a
// small message arrives with its flag in one cache line (as NCCL's LL protocol
// packs flag and data), a large one costs that line plus its data. tail counts
// slots ever released (written only by the receiver, read by the sender when
// its cached copy says the FIFO is full).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

#include "core/result.h"

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
  alignas(kCacheLine) std::atomic<uint64_t> tail;
};
static_assert(sizeof(Control) == 2 * kCacheLine, "Control layout changed");

constexpr size_t kInlineBytes = kCacheLine - 2 * sizeof(uint64_t);

struct alignas(kCacheLine) SlotDesc {
  std::atomic<uint64_t> seq;  // number of the message in the slot (1-based); 0: none yet
  uint64_t size;
  uint8_t inlineData[kInlineBytes];
};
static_assert(sizeof(SlotDesc) == kCacheLine, "SlotDesc must be one cache line");

constexpr size_t kDescOffset = sizeof(Control);

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
  SlotDesc& desc(uint64_t seq) const {
    return reinterpret_cast<SlotDesc*>(base_ + kDescOffset)[seq % layout_.nslots];
  }
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
      : region_(region), head_(region.control()->tail.load(std::memory_order_relaxed)), tailCache_(head_) {}

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
    SlotDesc& d = region_.desc(head_);
    d.size = bytes;
    if (bytes <= kInlineBytes) memcpy(d.inlineData, region_.slot(head_), bytes);
    d.seq.store(++head_, std::memory_order_release);
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
      : region_(region), tail_(region.control()->tail.load(std::memory_order_relaxed)) {}

  const void* peek(size_t* bytes) {
    SlotDesc& d = region_.desc(tail_);
    if (!ready_) {
      if (d.seq.load(std::memory_order_acquire) != tail_ + 1) return nullptr;
      ready_ = true;
    }
    const uint64_t size = d.size;
    // The size comes from another process's writes: never trust it to bound a read.
    if (size > region_.layout().slotBytes) {
      badSize_ = size;
      return nullptr;
    }
    *bytes = static_cast<size_t>(size);
    return size <= kInlineBytes ? static_cast<const void*>(d.inlineData) : region_.slot(tail_);
  }

  void release() {
    if (!ready_) return;  // nothing peeked: ignore rather than corrupt tail
    ready_ = false;
    region_.control()->tail.store(++tail_, std::memory_order_release);
  }

  // Non-zero once peek() found a slot size larger than slotBytes.
  uint64_t badSize() const { return badSize_; }

 private:
  Region region_;
  uint64_t tail_ = 0;
  bool ready_ = false;  // the descriptor of slot tail_ holds message tail_ + 1
  uint64_t badSize_ = 0;
};

}  // namespace fifo
}  // namespace braid
