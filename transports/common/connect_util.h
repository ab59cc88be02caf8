// Helpers shared by the transports' connection set-up: naming peers in
// messages, random identifiers, and bounded waiting that honours the
// request's deadline and abort flag.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "transports/transport.h"

namespace braid::common {

// "rank 3 (host node7, pid 1234)": what every error about a peer starts with.
std::string describePeer(const PeerInfo& peer);

// 64 random bits from the kernel (nonces, segment names).
uint64_t randomU64();

bool abortRequested(const transports::ConnectRequest& req);

// Non-success once the request is aborted or past its deadline; `what` says
// what was being waited for ("rank 3 (host a) to attach to the shm FIFO").
Result checkWait(const transports::ConnectRequest& req, const std::string& what);

// Milliseconds a poll() may sleep: what is left of the deadline, capped so an
// abort is noticed within 10 ms; 0 once the deadline passed.
int pollTimeoutMs(const transports::ConnectRequest& req);

// Waits until `ready()` is true, spinning briefly and then sleeping with a
// growing back-off (so many ranks on few cores still progress).
template <class Pred>
Result waitUntil(const transports::ConnectRequest& req, const std::string& what, Pred ready);

void backoff(int* round);

template <class Pred>
Result waitUntil(const transports::ConnectRequest& req, const std::string& what, Pred ready) {
  int round = 0;
  while (!ready()) {
    BRAID_TRY(checkWait(req, what));
    backoff(&round);
  }
  return Result::success();
}

}  // namespace braid::common
