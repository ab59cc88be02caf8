// Prepared groups of one communicator's calls (a lone call is a group of one),
// kept per communicator. A training loop issues the same few calls and groups
// over and over; planning one (cost model, generator, lane merging, FIFO
// lookup, lane image) costs more than moving 8 bytes, so the lanes of a group
// are kept and rerun with the next group's buffers.
//
// What a plan depends on is fixed for the communicator's life (ranks,
// settings, calibration, NCCL_ALGO at init, FIFOs, which are never dropped),
// so an entry never goes stale; only the key varies.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "engine/lanes/lane_group.h"
#include "engine/task.h"

namespace braid::lanes {

struct PlanKey {
  schedule::Collective coll = schedule::Collective::AllReduce;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  int root = 0;
  reduce::WireType wire = reduce::WireType::None;  // a wire type rules algorithms out
  bool operator==(const PlanKey& o) const {
    return coll == o.coll && count == o.count && type == o.type && root == o.root && wire == o.wire;
  }
};

PlanKey planKeyOf(const engine::Task& t);

// A group's calls in issue order: the lanes depend on all of them.
using GroupKey = std::vector<PlanKey>;
GroupKey groupKeyOf(const std::vector<engine::Task>& tasks);

// A handful of entries, least recently used replaced: lookups are a linear scan
// of a few short keys, cheaper than hashing.
class PlanCache {
 public:
  static constexpr size_t kEntries = 16;

  // The group of these calls (compared key by key, in order, so that a
  // lookup allocates nothing), or null.
  lanes::LaneGroup* find(const std::vector<engine::Task>& tasks);
  lanes::LaneGroup* find(const GroupKey& key);
  lanes::LaneGroup* insert(GroupKey key, std::unique_ptr<lanes::LaneGroup> group);

 private:
  struct Entry {
    GroupKey key;
    std::unique_ptr<lanes::LaneGroup> group;
    uint64_t lastUse = 0;
  };
  template <class KeyAt>
  lanes::LaneGroup* findWhere(size_t n, const KeyAt& keyAt);

  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
};

}  // namespace braid::lanes
