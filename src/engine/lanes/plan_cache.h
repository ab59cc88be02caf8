// Prepared lone calls, kept per communicator. A training loop issues the same
// few calls over and over; planning one (cost model, generator, lane merging,
// FIFO lookup, lane image) costs more than moving 8 bytes, so the lanes of a
// call are kept and rerun with the next call's buffers.
//
// What a plan depends on is fixed for the communicator's life (ranks,
// settings, calibration, NCCL_ALGO at init, FIFOs, which are never dropped),
// so an entry never goes stale; only the key varies.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "engine/task.h"
#include "engine/lanes/lane_group.h"

namespace braid {

struct PlanKey {
  Collective coll = Collective::AllReduce;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  int root = 0;
  bool operator==(const PlanKey& o) const {
    return coll == o.coll && count == o.count && type == o.type && root == o.root;
  }
};

PlanKey planKeyOf(const Task& t);

// A handful of entries, least recently used replaced: lookups are a linear scan
// of a few keys, cheaper than hashing.
class PlanCache {
 public:
  static constexpr size_t kEntries = 16;

  lanes::LaneGroup* find(const PlanKey& key);
  lanes::LaneGroup* insert(const PlanKey& key, std::unique_ptr<lanes::LaneGroup> group);

 private:
  struct Entry {
    PlanKey key;
    std::unique_ptr<lanes::LaneGroup> group;
    uint64_t lastUse = 0;
  };
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
};

}  // namespace braid
