// Test buffers with guard bytes on both sides (an out-of-range write by the
// library shows up as a changed guard), and the hash that makes test data a
// pure function of (seed, rank, index) so every rank can predict its peers'.
#ifndef BRAID_TESTS_COMMON_GUARDED_BUFFER_H_
#define BRAID_TESTS_COMMON_GUARDED_BUFFER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace testbuf {

constexpr size_t kGuardBytes = 64;
constexpr uint8_t kGuardByte = 0xA5;
constexpr uint8_t kFillByte = 0xCD;

inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The payload starts filled with kFillByte.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes) : bytes_(bytes), mem_(bytes + 2 * kGuardBytes, kFillByte) {
    std::fill(mem_.begin(), mem_.begin() + kGuardBytes, kGuardByte);
    std::fill(mem_.end() - kGuardBytes, mem_.end(), kGuardByte);
  }
  uint8_t* data() { return mem_.data() + kGuardBytes; }
  const uint8_t* data() const { return mem_.data() + kGuardBytes; }
  size_t bytes() const { return bytes_; }
  bool guardsIntact() const {
    auto isGuard = [](uint8_t b) { return b == kGuardByte; };
    return std::all_of(mem_.begin(), mem_.begin() + kGuardBytes, isGuard) &&
           std::all_of(mem_.end() - kGuardBytes, mem_.end(), isGuard);
  }
  std::vector<uint8_t> snapshot() const { return {data(), data() + bytes_}; }

 private:
  size_t bytes_;
  std::vector<uint8_t> mem_;
};

}  // namespace testbuf

#endif  // BRAID_TESTS_COMMON_GUARDED_BUFFER_H_
