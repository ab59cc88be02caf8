// Memory registration is slow (the kernel pins pages), so registered ranges are
// kept and reused: a request inside a cached range costs a lookup. Written
// against MrRegistrar so it runs without an RDMA device (tests fake it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>

#include "base/result.h"

namespace braid::ib {

struct MrKeys {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

class MrRegistrar {
 public:
  virtual ~MrRegistrar() = default;
  // Registers [addr, addr + bytes); `handle` is passed back to deregister.
  virtual Result registerRange(uintptr_t addr, size_t bytes, void** handle, MrKeys* keys) = 0;
  virtual void deregister(void* handle) = 0;
};

// Not thread-safe: one per protection domain, used by the thread that drives it.
// Keys returned by get() stay valid until `maxEntries` other ranges have been
// registered since their last use (LRU eviction) or invalidate() covers them,
// so a caller must not keep keys across that many misses.
class MrCache {
 public:
  // Ranges are widened to whole pages of `pageBytes` (a power of two), so that
  // neighbouring buffers share a registration.
  MrCache(MrRegistrar* registrar, size_t maxEntries, size_t pageBytes = 4096);
  ~MrCache();
  MrCache(const MrCache&) = delete;
  MrCache& operator=(const MrCache&) = delete;

  // Keys of a registration covering [addr, addr + bytes), registering on a miss.
  Result get(const void* addr, size_t bytes, MrKeys* out);
  // Deregisters every cached range overlapping [addr, addr + bytes): call before
  // that memory is freed, or a later allocation at the same address would reuse
  // a registration of pages that are no longer there.
  void invalidate(const void* addr, size_t bytes);

  size_t size() const { return entries_.size(); }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  uint64_t evictions() const { return evictions_; }

 private:
  struct Entry {
    uintptr_t begin;
    uintptr_t end;  // exclusive
    void* handle;
    MrKeys keys;
  };
  MrRegistrar* registrar_;
  size_t maxEntries_;
  uintptr_t pageMask_;
  std::list<Entry> entries_;  // most recently used first
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

}  // namespace braid::ib
