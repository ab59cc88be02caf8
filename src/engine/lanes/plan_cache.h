// Prepared groups of calls (a lone call is a group of one), kept by the
// communicator of the group's first call. A training loop issues the same few
// calls and groups over and over; planning one (cost model, generator, lane
// merging, FIFO lookup, lane image) costs more than moving 8 bytes, so the
// lanes of a group are kept and rerun with the next group's buffers. A group
// may span several communicators (one thread driving several ranks).
//
// What a plan depends on is fixed for the communicators' lives (ranks,
// settings, calibration, NCCL_ALGO at init, FIFOs, which are never dropped),
// so an entry never goes stale; only the key varies. The key names each
// call's communicator by its address and its random nonce (PeerInfo): an
// entry that names a communicator destroyed since is never found again, even
// by a new communicator at the same address, and is replaced in time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/lanes/lane_group.h"
#include "engine/task.h"

namespace braid::lanes {

struct PlanKey {
  const ncclComm* comm = nullptr;
  uint64_t commNonce = 0;
  schedule::Collective coll = schedule::Collective::AllReduce;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  int root = 0;
  reduce::WireType wire = reduce::WireType::None;  // a wire type rules algorithms out
  // The count first: it tells most shapes of one communicator apart.
  bool operator==(const PlanKey& o) const {
    return count == o.count && comm == o.comm && commNonce == o.commNonce && coll == o.coll && type == o.type &&
           root == o.root && wire == o.wire;
  }
};

PlanKey planKeyOf(const engine::Task& t);

// A group's calls in issue order: the lanes depend on all of them.
using GroupKey = std::vector<PlanKey>;
GroupKey groupKeyOf(const std::vector<engine::Task>& tasks);

// Values kept per group of calls: up to `Entries`, least recently used
// replaced, lookups a linear scan of the entries' first counts, kept in an
// array of their own (cheaper than hashing; where the count matches, the keys
// are compared key by key, in order, so that a lookup allocates nothing). The
// host runner keeps its LaneGroups so (PlanCache); plan kernels their
// launches, which hold device memory (engine/device/cuda_launch_cache.h).
template <class Value, size_t Entries = 16>
class GroupCache {
 public:
  static constexpr size_t kEntries = Entries;

  // The value of these calls, or null.
  Value* find(const std::vector<engine::Task>& tasks) {
    return findWhere(tasks.size(), [&](size_t i) { return planKeyOf(tasks[i]); }, [](const Value&) { return true; });
  }
  Value* find(const GroupKey& key) {
    return findWhere(key.size(), [&](size_t i) { return key[i]; }, [](const Value&) { return true; });
  }
  // The value of these calls that also satisfies `also`, or null.
  template <class Also>
  Value* find(const std::vector<const engine::Task*>& tasks, const Also& also) {
    return findWhere(tasks.size(), [&](size_t i) { return planKeyOf(*tasks[i]); }, also);
  }
  template <class Also>
  Value* find(const std::vector<engine::Task>& tasks, const Also& also) {
    return findWhere(tasks.size(), [&](size_t i) { return planKeyOf(tasks[i]); }, also);
  }
  // Keeps `value` for `key`; a value it replaces (beyond kEntries) goes to
  // retire(value) before it is destroyed.
  template <class Retire>
  Value* insert(GroupKey key, std::unique_ptr<Value> value, const Retire& retire) {
    size_t at = entries_.size();
    if (at < kEntries) {
      entries_.emplace_back();
      firstCounts_.push_back(0);
      lastUse_.push_back(0);
    } else {
      at = size_t(std::min_element(lastUse_.begin(), lastUse_.end()) - lastUse_.begin());
      retire(*entries_[at].value);
    }
    firstCounts_[at] = key.empty() ? 0 : key.front().count;
    entries_[at].key = std::move(key);
    entries_[at].value = std::move(value);
    lastUse_[at] = ++clock_;
    return entries_[at].value.get();
  }
  Value* insert(GroupKey key, std::unique_ptr<Value> value) {
    return insert(std::move(key), std::move(value), [](Value&) {});
  }
  // Every value, then none.
  template <class Retire>
  void clear(const Retire& retire) {
    for (Entry& e : entries_) retire(*e.value);
    entries_.clear();
    firstCounts_.clear();
    lastUse_.clear();
  }

 private:
  struct Entry {
    GroupKey key;
    std::unique_ptr<Value> value;
  };
  // The first call's key is made once, not once per entry; the entries are
  // tried from the one found last on, wrapping (a loop repeats one group).
  template <class KeyAt, class Also>
  Value* findWhere(size_t n, const KeyAt& keyAt, const Also& also) {
    if (n == 0) return nullptr;
    const PlanKey first = keyAt(0);
    const auto matches = [&](const Entry& e) {
      if (e.key.size() != n || !(e.key[0] == first)) return false;
      size_t i = 1;
      while (i < n && e.key[i] == keyAt(i)) ++i;
      return i == n && also(*e.value);
    };
    const size_t count = entries_.size();
    size_t k = last_ < count ? last_ : 0;
    for (size_t step = 0; step < count; ++step, k = k + 1 == count ? 0 : k + 1) {
      if (firstCounts_[k] != first.count || !matches(entries_[k])) continue;
      last_ = k;
      lastUse_[k] = ++clock_;
      return entries_[k].value.get();
    }
    return nullptr;
  }

  std::vector<Entry> entries_;
  // Beside entries_, index for index: what a scan reads, in a few cache lines.
  std::vector<size_t> firstCounts_;  // each entry's first call's count
  std::vector<uint64_t> lastUse_;    // clock_ at its last insert or find
  uint64_t clock_ = 0;
  size_t last_ = 0;  // index of the entry found last
};

// A loop over many call shapes (a model's layers, buckets of several sizes)
// would otherwise plan every call: each kept group costs a few KiB of host
// memory (2-30 KiB from 16 B to 64 MiB, docs/performance.md).
using PlanCache = GroupCache<lanes::LaneGroup, 64>;

}  // namespace braid::lanes
