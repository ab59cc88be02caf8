// Makes the connections a group needs and does not have yet.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "engine/comm.h"

namespace braid::engine {

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
// When one rank fails, it tells the others and then usually aborts, which
// breaks its connections: a rank that sees a peer go may be seeing the second
// failure, not the first. So before it blames what it saw, it gives a notice
// about an earlier failure this long to arrive.
constexpr std::chrono::milliseconds kNoticeGrace{200};

// Waits up to `grace` for a failure notice to one of `comms` (*from).
bool awaitFailureNotice(const std::vector<ncclComm*>& comms, std::chrono::milliseconds grace, ncclComm** from,
                        std::string* notice);

// A rank whose set-up or connection broke on a peer (`broken`) reports an
// earlier failure's notice, which says why, if one comes within kNoticeGrace;
// else `broken` (also when it is success).
Result preferFailureNotice(const std::vector<ncclComm*>& comms, Result broken);

Result awaitSetUpMessage(ncclComm* comm, int peer, uint32_t tag, const std::string& what);

}  // namespace braid::engine
