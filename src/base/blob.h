// Bounds-checked packing of plain values into connect blobs. Blobs cross the
// bootstrap as bytes, so readers never trust a length they did not check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace braid {

// Bytes one rank hands another over the bootstrap (connect blobs, FIFO
// handles); plain data only, decoded with BlobReader.
using Blob = std::vector<uint8_t>;

class BlobWriter {
 public:
  explicit BlobWriter(Blob* out) : out_(out) {}
  template <class T>
  BlobWriter& put(const T& v) {
    static_assert(std::is_trivially_copyable<T>::value, "blobs hold plain data only");
    // resize + memcpy rather than insert: GCC 12 at -O3 warns (falsely) about
    // the inlined range insert of a few bytes.
    const size_t at = out_->size();
    out_->resize(at + sizeof(T));
    memcpy(out_->data() + at, &v, sizeof(T));
    return *this;
  }
  BlobWriter& putString(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    out_->insert(out_->end(), s.begin(), s.end());
    return *this;
  }

 private:
  Blob* out_;
};

class BlobReader {
 public:
  explicit BlobReader(const Blob& in) : data_(in.data()), size_(in.size()) {}
  BlobReader(const void* data, size_t size)
      : data_(static_cast<const uint8_t*>(data)), size_(data ? size : 0) {}
  template <class T>
  bool get(T* v) {
    static_assert(std::is_trivially_copyable<T>::value, "blobs hold plain data only");
    if (size_ - pos_ < sizeof(T)) return false;
    memcpy(v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool getString(std::string* s, size_t maxLen) {
    uint32_t n = 0;
    if (!get(&n) || n > maxLen || size_ - pos_ < n) return false;
    s->assign(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return true;
  }
  bool atEnd() const { return pos_ == size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;  // invariant: pos_ <= size_
};

}  // namespace braid
