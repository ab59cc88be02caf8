#include "transports/ib/ib_mr_cache.h"

#include <limits>

namespace braid::ib {

MrCache::MrCache(MrRegistrar* registrar, size_t maxEntries, size_t pageBytes)
    : registrar_(registrar),
      maxEntries_(maxEntries ? maxEntries : 1),
      pageMask_(~(static_cast<uintptr_t>(pageBytes ? pageBytes : 1) - 1)) {}

MrCache::~MrCache() {
  for (auto& e : entries_) registrar_->deregister(e.handle);
}

Result MrCache::get(const void* addr, size_t bytes, MrKeys* out) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(addr);
  if (bytes == 0 || begin > std::numeric_limits<uintptr_t>::max() - bytes)
    return fail(ncclInvalidArgument, "cannot register %zu bytes at %p", bytes, addr);
  const uintptr_t end = begin + bytes;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->begin <= begin && end <= it->end) {
      entries_.splice(entries_.begin(), entries_, it);
      ++hits_;
      *out = it->keys;
      return Result::success();
    }
  }
  ++misses_;
  Entry e;
  e.begin = begin & pageMask_;
  const uintptr_t pageEnd = (end + ~pageMask_) & pageMask_;
  e.end = pageEnd < end ? end : pageEnd;  // rounding up wrapped: keep the exact end
  BRAID_TRY(registrar_->registerRange(e.begin, e.end - e.begin, &e.handle, &e.keys));
  entries_.push_front(e);
  while (entries_.size() > maxEntries_) {
    registrar_->deregister(entries_.back().handle);
    entries_.pop_back();
    ++evictions_;
  }
  *out = e.keys;
  return Result::success();
}

void MrCache::invalidate(const void* addr, size_t bytes) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t end =
      begin > std::numeric_limits<uintptr_t>::max() - bytes ? std::numeric_limits<uintptr_t>::max()
                                                            : begin + bytes;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->begin < end && begin < it->end) {
      registrar_->deregister(it->handle);
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace braid::ib
