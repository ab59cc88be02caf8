// TCP socket helpers (the bootstrap and the TCP transport): address formatting and
// parsing, connect-with-retry, and exact send/recv bounded by a deadline.
// Every socket made here is non-blocking; waiting is done with poll so that a
// deadline or an abort flag can always interrupt it.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/clock.h"
#include "base/result.h"
#include "base/unique_fd.h"

namespace braid {

// Abort flag shared between a waiting call and whoever may abort it.
using AbortFlag = std::atomic<bool>;

// Longest single poll() wait, so that abort flags and stop requests are noticed.
constexpr int kPollSliceMs = 100;

// Milliseconds to the deadline, clamped to [0, cap].
int msUntil(Deadline deadline, int cap = kPollSliceMs);

// Bytes of the sockaddr behind `addr` (sockaddr_in or sockaddr_in6); 0 otherwise.
socklen_t addrLength(const sockaddr_storage& addr);
// "10.1.2.3:5000" or "[fe80::1]:5000"; "<unknown family N>" otherwise.
std::string addrToString(const sockaddr_storage& addr);
// Address without port, for interface lists.
std::string hostToString(const sockaddr_storage& addr);
bool isLoopback(const sockaddr_storage& addr);
uint16_t addrPort(const sockaddr_storage& addr);
void setAddrPort(sockaddr_storage* addr, uint16_t port);

// Parses "<ipv4>:<port>", "<hostname>:<port>", "[<ipv6>]:<port>" (the form of
// NCCL_COMM_ID). `family` (AF_UNSPEC, AF_INET, AF_INET6) restricts name lookup.
Result parseHostPort(const std::string& text, int family, sockaddr_storage* out);

// A listening socket bound to `addr` (port 0 picks a free port). `out_addr`
// receives the bound address with its actual port.
Result listenOn(const sockaddr_storage& addr, bool reuseAddr, UniqueFd* out,
                sockaddr_storage* boundAddr);

// Accepts one pending connection (non-blocking); *out stays invalid when none is
// pending. `peer` receives the remote address when not null.
Result acceptOne(const UniqueFd& listener, UniqueFd* out, sockaddr_storage* peer);

// Connects to `addr`, retrying refused/unreachable attempts with backoff until
// `deadline` (the listener may not exist yet). `abort` may be null.
Result connectWithRetry(const sockaddr_storage& addr, Deadline deadline, const AbortFlag* abort,
                        UniqueFd* out);

// Outcome of an exact transfer; the caller turns it into a message that names
// the peer, since only it knows who is at the other end.
enum class IoStatus { kDone, kTimeout, kClosed, kAborted, kError };
struct IoProgress {
  size_t done = 0;  // bytes moved so far (a retry resumes from here)
  int err = 0;      // errno for kError
};
std::string describeIo(IoStatus status, const IoProgress& progress, size_t total);

// Moves exactly `bytes` (continuing from progress->done), waiting with poll.
IoStatus sendExact(const UniqueFd& s, const void* data, size_t bytes, Deadline deadline,
                   const AbortFlag* abort, IoProgress* progress);
IoStatus recvExact(const UniqueFd& s, void* data, size_t bytes, Deadline deadline,
                   const AbortFlag* abort, IoProgress* progress);

// One non-blocking read. Returns bytes read (>0), 0 on orderly close, -1 with
// errno==EAGAIN when nothing is there, -1 with another errno on failure.
ssize_t readSome(const UniqueFd& s, void* data, size_t bytes);

}  // namespace braid
