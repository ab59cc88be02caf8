// Out-of-band channel between the ranks of one communicator: the unique id, the
// root that introduces ranks to each other, and tagged point-to-point messages
// over TCP used for connection set-up, split and small collectives at init.
#pragma once

#include <nccl.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "base/result.h"

namespace braid::bootstrap {

// Fills `id` with the root's address and a random magic. Without NCCL_COMM_ID it
// starts a root thread in this process that lives until every rank has checked
// in (or BRAID_BOOTSTRAP_TIMEOUT passes). With NCCL_COMM_ID=<host>:<port> every
// process gets the same id without starting anything, and rank 0's
// Bootstrap::create() runs the root at that address.
Result createUniqueId(ncclUniqueId* id);

// Like createUniqueId without NCCL_COMM_ID, whatever the environment says: a
// fresh random magic and a root thread in this process. For ids that braid makes
// for itself (ncclCommSplit, ncclCommInitAll), which must not collide with the
// user's NCCL_COMM_ID job.
Result createPrivateUniqueId(ncclUniqueId* id);

// Tags used by the rest of braid; users of send/recv pick from these ranges.
enum BootstrapTag : uint32_t {
  kTagAllGather = 1,
  kTagBarrier = 2,
  kTagSplit = 3,
  kTagFailure = 4,  // a rank tells the others that the job lost a peer
  kTagDiagnosis = 5,  // after a timeout, each rank tells rank 0 where it is
  kTagLaneFifo = 6,   // the engine's FIFO blobs (src/engine/lanes)
  kTagCallProbe = 7,  // a stalled rank tells the rank it waits on which call it is in
  kTagConnectBase = 0x1000,  // + channel, for transport blobs
};

// A failure notice saying that ranks called different things (the engine's
// fingerprints differ), in a form the other ranks can act on.
//   Received: `text` is "rank R called X as operation #k", the call of the
//             rank that received a message of another call from `sender`.
//   Paired:   `text` is the whole sentence, from the sender itself: "rank S
//             called Y as operation #j while rank R called X as operation #k".
struct MismatchNotice {
  enum Kind : char { Received = 'R', Paired = 'P' } kind = Received;
  int sender = -1;
  int reporter = -1;         // the rank that received the message
  uint32_t fingerprint = 0;  // the one the message carried
  // The reporter's operation number (its #k; 0 where unknown). A rank still in an
  // earlier operation finishes that one first: every rank that reached #k
  // has sent all it had to send for the earlier ones.
  uint64_t operation = 0;
  std::string text;
};
std::string encodeMismatchNotice(const MismatchNotice& n);
// Finds a mismatch notice in what pollFailure returned; false for any other.
bool parseMismatchNotice(const std::string& notice, MismatchNotice* out);
// What a user reads of it.
std::string mismatchText(const MismatchNotice& n);

// The error a rank returns when it learns of a failure from another's notice:
// a lost rank (ncclRemoteError), or ranks that called different things
// (ncclInvalidUsage).
Result failureNoticeError(int rank, const std::string& notice);

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  // Joins the job named by `id` as `rank` of `nranks`; returns once every rank's
  // address is known. Fails with a message naming the missing ranks at `deadline`.
  static Result create(const ncclUniqueId& id, int rank, int nranks, Deadline deadline,
                       std::unique_ptr<Bootstrap>* out);

  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  // The local address chosen for this job (NCCL_SOCKET_IFNAME, else the interface
  // that reaches the root, else loopback); transports listen on the same one.
  virtual const sockaddr_storage& localAddress() const = 0;  // port 0
  // Where this rank's bootstrap listens (localAddress() plus its port): for logs
  // and tests.
  virtual const sockaddr_storage& listenAddress() const = 0;

  // Tagged messages; a message for (peer, tag) is delivered in order of sending.
  // recv() needs exactly `bytes`; a size mismatch is an error naming both.
  virtual Result send(int peer, uint32_t tag, const void* data, size_t bytes) = 0;
  virtual Result recv(int peer, uint32_t tag, void* data, size_t bytes, Deadline deadline) = 0;
  // Waits up to timeoutMs for a message from (peer, tag) without taking it: sets
  // *ready once recv() would return at once (with the message or its error).
  virtual Result waitFor(int peer, uint32_t tag, int timeoutMs, bool* ready) = 0;

  // `data` holds nranks blocks of `bytes`; block rank() is ours on entry, all
  // blocks are filled on return.
  virtual Result allGather(void* data, size_t bytes, Deadline deadline) = 0;
  virtual Result barrier(Deadline deadline) = 0;

  // Makes every blocked or later call fail promptly (ncclCommAbort).
  virtual void abort() = 0;

  // Failure notices. A rank that loses a peer tells every other rank it can reach
  // (best effort, bounded by `deadline`, skipping `lostRank`), so that ranks
  // waiting on someone else hear of it within seconds rather than at their
  // timeout. pollFailure() never blocks: it reads what has arrived and returns
  // the first notice, if any.
  virtual void notifyFailure(const std::string& text, int lostRank, Deadline deadline) = 0;
  virtual bool pollFailure(std::string* text) = 0;
  // Every notice that has arrived (from `peer` only, when not -1), in rank
  // order and each rank's in order of sending; never blocks.
  virtual std::vector<std::string> failureNotices(int peer = -1) = 0;
};

}  // namespace braid::bootstrap
