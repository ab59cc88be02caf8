#include "engine/lanes/plan_cache.h"

#include <algorithm>

namespace braid::lanes {

PlanKey planKeyOf(const engine::Task& t) {
  PlanKey k;
  k.coll = t.coll;
  k.count = t.count;
  k.type = t.type;
  k.root = t.root;
  k.wire = t.wire;
  return k;
}

GroupKey groupKeyOf(const std::vector<engine::Task>& tasks) {
  GroupKey key;
  key.reserve(tasks.size());
  for (const engine::Task& t : tasks) key.push_back(planKeyOf(t));
  return key;
}

template <class KeyAt>
lanes::LaneGroup* PlanCache::findWhere(size_t n, const KeyAt& keyAt) {
  for (Entry& e : entries_) {
    if (e.key.size() != n) continue;
    size_t i = 0;
    while (i < n && e.key[i] == keyAt(i)) ++i;
    if (i < n) continue;
    e.lastUse = ++clock_;
    return e.group.get();
  }
  return nullptr;
}

lanes::LaneGroup* PlanCache::find(const std::vector<engine::Task>& tasks) {
  return findWhere(tasks.size(), [&](size_t i) { return planKeyOf(tasks[i]); });
}

lanes::LaneGroup* PlanCache::find(const GroupKey& key) {
  return findWhere(key.size(), [&](size_t i) { return key[i]; });
}

lanes::LaneGroup* PlanCache::insert(GroupKey key, std::unique_ptr<lanes::LaneGroup> group) {
  Entry* slot = nullptr;
  if (entries_.size() < kEntries) {
    slot = &entries_.emplace_back();
  } else {
    slot = &*std::min_element(entries_.begin(), entries_.end(),
                              [](const Entry& a, const Entry& b) { return a.lastUse < b.lastUse; });
  }
  slot->key = std::move(key);
  slot->group = std::move(group);
  slot->lastUse = ++clock_;
  return slot->group.get();
}

}  // namespace braid::lanes
