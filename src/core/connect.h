// Makes the connections a group needs and does not have yet.
#pragma once

#include <vector>

#include "core/comm.h"

namespace braid {

struct ConnectionNeed {
  ncclComm* comm;
  int peer;
  int channel;
  bool send;  // true: comm->sendConns; false: comm->recvConns
};

// Runs the transports' three phases over all needs at once (see
// transports/transport.h), so several communicators driven by one thread
// connect without waiting on each other. Needs already met are skipped.
Result connectAll(const std::vector<ConnectionNeed>& needs);

}  // namespace braid
