// Bounds-checked packing of plain values into connect blobs. Blobs cross the
// bootstrap as bytes, so readers never trust a length they did not check.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "transports/transport.h"

namespace braid {

class BlobWriter {
 public:
  explicit BlobWriter(Blob* out) : out_(out) {}
  template <class T>
  BlobWriter& put(const T& v) {
    static_assert(std::is_trivially_copyable<T>::value, "blobs hold plain data only");
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
    out_->insert(out_->end(), p, p + sizeof(T));
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
  explicit BlobReader(const Blob& in) : in_(in) {}
  template <class T>
  bool get(T* v) {
    static_assert(std::is_trivially_copyable<T>::value, "blobs hold plain data only");
    if (in_.size() - pos_ < sizeof(T)) return false;
    memcpy(v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  bool getString(std::string* s, size_t maxLen) {
    uint32_t n = 0;
    if (!get(&n) || n > maxLen || in_.size() - pos_ < n) return false;
    s->assign(reinterpret_cast<const char*>(in_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  bool atEnd() const { return pos_ == in_.size(); }

 private:
  const Blob& in_;
  size_t pos_ = 0;
};

}  // namespace braid
