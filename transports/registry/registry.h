// The transports a communicator tries for each pair of ranks, in order: the
// first whose canConnect() is true joins the pair (braid-topo and the pair
// classification ask the same list).
#pragma once

#include <memory>
#include <vector>

#include "transports/transport.h"

namespace braid::registry {

std::vector<std::unique_ptr<transports::Transport>> makeTransports();

}  // namespace braid::registry
