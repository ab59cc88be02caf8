// Prepared work of single-operation groups, kept per communicator. A training
// loop issues the same few calls over and over; planning one (cost model,
// generator, connection lookup) costs more than moving 8 bytes, so the bound
// steps of a call are kept and reused with the next call's buffers.
//
// What a plan depends on is fixed for the communicator's life (ranks,
// settings, calibration, NCCL_ALGO at init, connections, which are never
// dropped), so an entry never goes stale; only the key varies.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/task.h"
#include "runtime/host/executor.h"

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

struct CachedWork {
  PlanKey key;
  HostWork work;
  uint64_t lastUse = 0;
};

// A handful of entries, least recently used replaced: lookups are a linear scan
// of a few keys, cheaper than hashing.
class PlanCache {
 public:
  static constexpr size_t kEntries = 16;

  // The entry for `key` with its lanes rewound, or nullptr.
  CachedWork* find(const PlanKey& key);
  CachedWork* insert(const PlanKey& key, HostWork&& work);

 private:
  std::vector<std::unique_ptr<CachedWork>> entries_;
  uint64_t clock_ = 0;
};

// Points the cached work at this call's buffers and reduction.
void rebindSingleOp(CachedWork* cached, const Task& t, char* scratch);

}  // namespace braid
