#include "tuning/cost_model.h"

#include <algorithm>
#include <limits>

namespace braid {

const char* transportClassName(TransportClass c) {
  switch (c) {
    case TransportClass::InProcess: return "InProcess";
    case TransportClass::SharedMemory: return "SharedMemory";
    case TransportClass::Tcp: return "Tcp";
  }
  return "?";
}

double costSeconds(const StepCost& c, const CostParams& p) {
  return c.steps * p.alpha + c.bytes * p.beta + c.reducedBytes * p.gamma + c.copiedBytes * p.copyBeta;
}

double modelBytes(Collective coll, size_t count, size_t elemSize, int nranks) {
  double b = static_cast<double>(count) * static_cast<double>(elemSize);
  switch (coll) {
    case Collective::ReduceScatter:
    case Collective::AllGather:
    case Collective::AllToAll: return b * std::max(nranks, 1);
    default: return b;
  }
}

bool modelCost(Collective coll, Algorithm algo, const ModelShape& s, StepCost* out) {
  const Schedule* schedule = findSchedule(coll, algo);
  if (schedule == nullptr) return false;
  *out = schedule->cost(s);
  return true;
}

double predictSeconds(Collective coll, Algorithm algo, const ModelShape& s, const CostParams& p) {
  StepCost c;
  if (!modelCost(coll, algo, s, &c)) return std::numeric_limits<double>::infinity();
  return costSeconds(c, p);
}

bool isPipelined(Collective coll, Algorithm algo) {
  const Schedule* schedule = findSchedule(coll, algo);
  return schedule != nullptr && schedule->pipelined;
}

}  // namespace braid
