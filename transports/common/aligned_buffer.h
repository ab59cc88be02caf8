// Zero-initialised heap memory with a chosen alignment (slots are read and
// written by vectorised reduction code, so they start on cache lines or pages).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace braid {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Empty (data() == nullptr) when the allocation fails; callers check.
  AlignedBuffer(size_t bytes, size_t align) : size_(bytes) {
    size_t rounded = (bytes + align - 1) / align * align;
    void* p = std::aligned_alloc(align, rounded == 0 ? align : rounded);
    if (p) memset(p, 0, rounded);
    else size_ = 0;
    mem_.reset(static_cast<uint8_t*>(p));
  }

  uint8_t* data() const { return mem_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> mem_;
  size_t size_ = 0;
};

}  // namespace braid
