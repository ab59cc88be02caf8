#include "tuning/cost_model.h"

#include <algorithm>
#include <limits>

namespace braid::tuning {

const char* transportClassName(TransportClass c) {
  switch (c) {
    case TransportClass::InProcess: return "InProcess";
    case TransportClass::SharedMemory: return "SharedMemory";
    case TransportClass::Tcp: return "Tcp";
  }
  return "?";
}

double costSeconds(const schedule::StepCost& c, const CostParams& p) {
  return c.steps * p.alpha + c.bytes * p.beta + c.reducedBytes * p.gamma + c.copiedBytes * p.copyBeta;
}

double modelBytes(schedule::Collective coll, size_t count, size_t elemSize, int nranks) {
  double b = static_cast<double>(count) * static_cast<double>(elemSize);
  switch (coll) {
    case schedule::Collective::ReduceScatter:
    case schedule::Collective::AllGather:
    case schedule::Collective::AllToAll: return b * std::max(nranks, 1);
    default: return b;
  }
}

bool modelCost(schedule::Collective coll, schedule::Algorithm algo, const schedule::ModelShape& s,
               schedule::StepCost* out) {
  const schedule::Schedule* schedule = findSchedule(coll, algo);
  if (schedule == nullptr) return false;
  *out = schedule->cost(s);
  return true;
}

double predictSeconds(schedule::Collective coll, schedule::Algorithm algo, const schedule::ModelShape& s,
                      const CostParams& p) {
  schedule::StepCost c;
  if (!modelCost(coll, algo, s, &c)) return std::numeric_limits<double>::infinity();
  return costSeconds(c, p);
}

bool isPipelined(schedule::Collective coll, schedule::Algorithm algo) {
  const schedule::Schedule* schedule = findSchedule(coll, algo);
  return schedule != nullptr && schedule->pipelined;
}

}  // namespace braid::tuning
