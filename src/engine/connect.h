// Makes the connections a group needs and does not have yet.
#pragma once

#include <string>
#include <vector>

#include "engine/comm.h"

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

// Waits until `peer`'s message with `tag` is there to receive (or the
// deadline passed: recv then reports it), watching meanwhile for abort, a
// failure notice from another rank, the peer's process dying, and SIGUSR1
// (which prints "setting up connections, waiting for rank P's <what>").
// A peer that failed first usually told the others before it went: a rank
// whose set-up then breaks on that peer (`broken`) reports the notice, which
// says why, rather than the broken connection or FIFO (given 200 ms to
// arrive). `broken` when none comes, or when it is success.
Result preferFailureNotice(const std::vector<ncclComm*>& comms, Result broken);

Result awaitSetUpMessage(ncclComm* comm, int peer, uint32_t tag, const std::string& what);

}  // namespace braid
