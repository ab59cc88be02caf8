// Zero-initialised memory with a chosen alignment (slots are read and written
// by vectorised reduction code, so they start on cache lines or pages). Large
// buffers (FIFOs, slot rings) are mapped from the kernel, page-aligned and
// already zero, and go back to it when freed: from the heap, buffers of
// megabytes made and freed with every communicator would leave it
// fragmented and the process's memory growing.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace braid {

class AlignedBuffer {
 public:
  static constexpr size_t kMapAtLeast = 256 * 1024;

  AlignedBuffer() = default;
  // Empty (data() == nullptr) when the allocation fails; callers check.
  AlignedBuffer(size_t bytes, size_t align) : size_(bytes) {
    size_t rounded = (bytes + align - 1) / align * align;
    if (rounded >= kMapAtLeast && align <= 4096) {
      void* p = mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) p = nullptr;
      if (p == nullptr) size_ = 0;
      mem_ = Owned(static_cast<uint8_t*>(p), Release{p ? rounded : 0});
      return;
    }
    void* p = std::aligned_alloc(align, rounded == 0 ? align : rounded);
    if (p) memset(p, 0, rounded);
    else size_ = 0;
    mem_ = Owned(static_cast<uint8_t*>(p), Release{0});
  }

  uint8_t* data() const { return mem_.get(); }
  size_t size() const { return size_; }

 private:
  // mapped: the length of the mapping; 0: from the heap.
  struct Release {
    size_t mapped = 0;
    void operator()(uint8_t* p) const {
      if (mapped != 0) munmap(p, mapped);
      else std::free(p);
    }
  };
  using Owned = std::unique_ptr<uint8_t, Release>;
  Owned mem_{nullptr, Release{}};
  size_t size_ = 0;
};

}  // namespace braid
