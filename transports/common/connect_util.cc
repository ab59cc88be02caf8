#include "transports/common/connect_util.h"

#include <nccl.h>
#include <sched.h>
#include <sys/random.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "base/process_liveness.h"

namespace braid::common {

std::string describePeer(const PeerInfo& peer) {
  char host[sizeof(peer.hostname) + 1] = {};
  memcpy(host, peer.hostname, sizeof(peer.hostname));
  return "rank " + std::to_string(peer.rank) + " (host " + (host[0] ? host : "?") + ", pid " +
         std::to_string(peer.pid) + ")";
}

uint64_t randomU64() {
  uint64_t v = 0;
  ssize_t n;
  do {
    n = getrandom(&v, sizeof(v), 0);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof(v))) {
    // No entropy source: mix time and address bits; uniqueness, not secrecy, matters.
    static std::atomic<uint64_t> counter{0};
    v = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (counter.fetch_add(1) * 0x9e3779b97f4a7c15ull) ^ reinterpret_cast<uintptr_t>(&v);
  }
  return v;
}

bool abortRequested(const transports::ConnectRequest& req) {
  // Atomic load: the flag is set by another thread (ncclCommAbort) or a kernel.
  return req.abortFlag != nullptr && req.abortFlag->load(std::memory_order_relaxed) != 0;
}

Result checkWait(const transports::ConnectRequest& req, const std::string& what) {
  if (abortRequested(req))
    return fail(ncclInternalError, "aborted while waiting for %s", what.c_str());
  if (Clock::now() >= req.deadline)
    return fail(ncclRemoteError,
                "timed out waiting for %s; check that rank's log for an earlier error, or raise "
                "the connect timeout",
                what.c_str());
  // A peer killed during set-up never attaches: notice it instead of waiting out
  // the timeout (checked at most every 100 ms: it reads /proc).
  thread_local Clock::time_point nextLivenessCheck;
  const Clock::time_point now = Clock::now();
  if (now >= nextLivenessCheck) {
    nextLivenessCheck = now + std::chrono::milliseconds(100);
    BRAID_TRY(checkPeerProcess(req.self, req.peer, "waiting for " + what));
    if (req.whileWaiting) BRAID_TRY(req.whileWaiting());
  }
  return Result::success();
}

int pollTimeoutMs(const transports::ConnectRequest& req) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(req.deadline - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 10));
}

void backoff(int* round) {
  // A few yields keep hand-offs between threads on one core fast; after that
  // sleep up to 1 ms so a waiting rank does not steal the peer's core.
  if (*round < 16) {
    sched_yield();
  } else {
    long ns = std::min(1000000L, 1000L << std::min(*round - 16, 10));
    timespec ts{0, ns};
    nanosleep(&ts, nullptr);
  }
  ++*round;
}

}  // namespace braid::common
