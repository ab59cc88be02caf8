#include "engine/lanes/plan_cache.h"

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

}  // namespace braid::lanes
