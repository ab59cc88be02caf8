// Pinned host memory for the staged device path, kept per communicator and
// reused: cudaHostAlloc is far too slow to pay on every call.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <vector>

#include "core/result.h"

namespace braid {

struct PinnedBlock {
  char* data = nullptr;
  size_t bytes = 0;  // capacity: a power of two
};

class StagingPool {
 public:
  StagingPool() = default;
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  // A block of at least `bytes` (a free one of its size class, or a new one).
  Result acquire(size_t bytes, PinnedBlock* out);
  // Only once no copy and no host work uses it any more.
  void release(const PinnedBlock& block);
  // A block something may still use: never reused nor freed.
  void abandon(const PinnedBlock& block);

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<char*>> free_;  // by capacity
  std::vector<char*> all_;                     // freed at destruction
};

// Two words of mapped pinned memory that stream-wait kernels read: the last
// published job sequence and the abort word.
class MappedWords {
 public:
  MappedWords() = default;
  ~MappedWords();
  MappedWords(const MappedWords&) = delete;
  MappedWords& operator=(const MappedWords&) = delete;

  Result allocate();
  void publish(uint64_t sequence);
  void setAbort();
  void leak() { host_ = nullptr; }  // a kernel may still read them
  const volatile uint64_t* devicePublished() const { return devicePublished_; }
  const volatile uint32_t* deviceAbort() const { return deviceAbort_; }

 private:
  struct Words {
    uint64_t published;
    uint32_t abort;
  };
  Words* host_ = nullptr;
  const volatile uint64_t* devicePublished_ = nullptr;
  const volatile uint32_t* deviceAbort_ = nullptr;
};

}  // namespace braid
