#include "engine/lanes/plan_cache.h"

#include "engine/comm.h"

namespace braid::lanes {

PlanKey planKeyOf(const engine::Task& t) {
  PlanKey k;
  k.comm = t.comm;
  // (Tests of the key alone make tasks without a communicator.)
  k.commNonce = t.comm != nullptr ? t.comm->peers[size_t(t.comm->rank)].nonce : 0;
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
