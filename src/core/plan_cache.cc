#include "core/plan_cache.h"

#include <algorithm>

#include "core/comm.h"

namespace braid {

PlanKey planKeyOf(const Task& t) {
  PlanKey k;
  k.coll = t.coll;
  k.count = t.count;
  k.type = t.type;
  k.root = t.root;
  return k;
}

CachedWork* PlanCache::find(const PlanKey& key) {
  for (auto& e : entries_) {
    if (!(e->key == key)) continue;
    e->lastUse = ++clock_;
    for (LaneWork& lane : e->work.lanes) lane.next = 0;
    return e.get();
  }
  return nullptr;
}

CachedWork* PlanCache::insert(const PlanKey& key, HostWork&& work) {
  std::unique_ptr<CachedWork>* slot = nullptr;
  if (entries_.size() < kEntries) {
    slot = &entries_.emplace_back(std::make_unique<CachedWork>());
  } else {
    slot = &*std::min_element(entries_.begin(), entries_.end(),
                              [](const auto& a, const auto& b) { return a->lastUse < b->lastUse; });
    *slot = std::make_unique<CachedWork>();
  }
  CachedWork& e = **slot;
  e.key = key;
  e.work = std::move(work);
  e.lastUse = ++clock_;
  for (LaneWork& lane : e.work.lanes) lane.next = 0;
  return &e;
}

void rebindSingleOp(CachedWork* cached, const Task& t, char* scratch) {
  BoundOp& op = cached->work.ops.front();
  op.input = static_cast<const char*>(t.sendbuff);
  op.output = static_cast<char*>(t.recvbuff);
  op.scratch = scratch;
  op.op = t.op;
  op.sequence = t.sequence;
}

}  // namespace braid
