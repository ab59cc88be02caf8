// BRAID_CHECK=1: before a group runs, the ranks of each communicator compare
// the collectives they are about to run, and a rank that called something else
// (another collective, count, datatype, op or root) makes every rank fail with
// ncclInvalidUsage naming both calls, instead of corrupting data or hanging.
// Point-to-point calls differ between ranks by design and are not compared.
// It costs one bootstrap allGather per group (see docs/reliability.md).
#pragma once

#include <vector>

#include "base/result.h"
#include "engine/task.h"

namespace braid::core {

Result checkCallsMatch(const std::vector<engine::Task>& tasks);

}  // namespace braid::core
