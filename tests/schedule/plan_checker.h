// Symbolic execution of generated plans: instead of numbers, every element holds
// the list of (rank, input index) contributions that reached it. Running every
// rank's plan over bounded FIFOs proves, without moving data, that the result is
// right (nothing missing, nothing counted twice), that every receive has its
// send, and that the plan cannot deadlock with `nslots` slots per connection.
#pragma once

#include <functional>
#include <string>

#include "schedule/generate.h"

namespace braid {

struct CheckOptions {
  int nslots = 2;
  // Lets a test break a generated plan to prove the checker notices.
  std::function<void(int rank, Plan* plan)> mutate;
};

// Empty string: the plans of all ranks are correct. Otherwise what went wrong.
std::string checkCollective(const CollShape& shapeOfRank0, const CheckOptions& opts = {});

}  // namespace braid
