// The one interface every transport implements. A transport says whether it
// joins two ranks (canConnect) and how: ranks that share memory (inproc, shm)
// get the engine's FIFOs in memory both map (transports/fifo_memory.h); the
// others (TCP, IB) get connections. A connection is a one-way FIFO of
// `nslots` slots of `slotBytes` bytes between a sender rank and a receiver
// rank, for one channel; the engine's network bridge fills slots on the
// sending side and drains them on the receiving side, and progress() moves
// the bytes.
//
// Setting a connection up takes three phases, run for every pending connection
// of a group before the next phase starts, so that one thread can connect many
// communicators without deadlock:
//   1. receiver: Transport::listen()      -> RecvEndpoint, whose blob() goes to
//                                            the sender over the bootstrap
//   2. sender:   Transport::connect(blob) -> SendConnection
//   3. receiver: RecvEndpoint::accept()   -> RecvConnection
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/blob.h"
#include "base/clock.h"
#include "base/peer_info.h"
#include "base/result.h"

namespace braid::transports {

struct ConnectRequest {
  PeerInfo self;
  PeerInfo peer;
  int channel = 0;
  size_t slotBytes = 0;
  int nslots = 0;
  Deadline deadline;
  const std::atomic<uint32_t>* abortFlag = nullptr;  // non-zero: give up waiting
  // The engine's own checks while a set-up wait lasts (another rank's failure
  // notice, a call that differs): called every 100 ms or so; an error ends
  // the wait with it.
  std::function<Result()> whileWaiting;
};

// Slot memory a connection may move messages from, or into, in place of a ring
// of its own: the engine's FIFO slots. The connection's slot k (k = 0, 1, ...
// in posting or arrival order) is at base + ((k + first) % nslots) * stride.
struct SlotMemory {
  uint8_t* base = nullptr;
  size_t stride = 0;
  uint32_t nslots = 0;
  uint32_t first = 0;
};

class SendConnection {
 public:
  virtual ~SendConnection() = default;
  // A writable buffer of slotBytes for the next slot, or nullptr while the FIFO is
  // full. Calling it again before post() returns the same buffer.
  virtual void* acquire() = 0;
  // Publishes the first `bytes` (<= slotBytes, may be 0) of the acquired buffer,
  // with `mark` (the engine's fingerprint of the message's operation), which
  // the receiver gets back with it. With useSlots only, `from` (when not null)
  // says where the bytes are instead of the slot: memory that stays as it is
  // until sentSlots() counts this slot (a user buffer sent in place).
  virtual void post(size_t bytes, uint32_t mark = 0, const void* from = nullptr) = 0;
  // Moves data that is waiting in this process (no-op for shared memory).
  virtual Result progress() = 0;
  // True when every posted slot has left this process's buffers: the executor may
  // return to the user only then.
  virtual bool flushed() const = 0;
  // An error naming the peer if it is known to be gone (its process exited). Called
  // now and then while a step waits on this connection, so it may cost a system call.
  virtual Result checkPeer() { return Result::success(); }
  // Sends from `slots` in place from now on (called before anything was
  // posted): acquire() returns the slot there, and a slot may be written
  // again once sentSlots() counts it. False where the transport keeps slot
  // memory of its own (registered memory, say).
  virtual bool useSlots(const SlotMemory& slots) { return false; }
  // Slots posted so far that have left this process (with useSlots).
  virtual uint64_t sentSlots() const { return 0; }
  // Slot k, posted with `from`, stops reading there: what of it has not
  // left yet is copied into its slot first, so the bytes at `from` may
  // change from now on.
  virtual void detach(uint64_t k) {}
};

class RecvConnection {
 public:
  virtual ~RecvConnection() = default;
  // The oldest unreleased slot, its size and its sender's mark (when `mark` is
  // not null), or nullptr if none has arrived.
  virtual const void* peek(size_t* bytes, uint32_t* mark = nullptr) = 0;
  // Frees the slot returned by peek() for the sender to reuse.
  virtual void release() = 0;
  // Moves data that is waiting in this process (no-op for shared memory).
  virtual Result progress() = 0;
  // As SendConnection::checkPeer.
  virtual Result checkPeer() { return Result::success(); }
  // Receives into `slots` in place from now on (called before anything
  // arrived); a slot is read into only after release() gave it back. False
  // where the transport keeps slot memory of its own.
  virtual bool useSlots(const SlotMemory& slots) { return false; }
  // Slot k (counting every slot from 0), its size and mark once it has
  // arrived, until it is released; null otherwise. Where it was received
  // into `dst` (receiveInto), that is what this returns.
  virtual const void* arrived(uint64_t k, size_t* bytes, uint32_t* mark = nullptr) { return nullptr; }
  // Slot k's bytes go to `dst` (memory nothing else touches
  // meanwhile: a user buffer received in place) instead of its slot, where
  // they are `bytes` long and none of them has been read yet; else they go
  // to the slot as always. Calls come in increasing k. False where the
  // connection cannot.
  virtual bool receiveInto(uint64_t k, void* dst, size_t bytes) { return false; }
  // Drops every receiveInto not yet used: the memory they named may go.
  virtual void forgetDestinations() {}
};

class RecvEndpoint {
 public:
  virtual ~RecvEndpoint() = default;
  // The bytes the sender needs to attach; sent over the bootstrap.
  virtual const Blob& blob() const = 0;
  // Waits until the sender attached (bounded by the request's deadline).
  virtual Result accept(std::unique_ptr<RecvConnection>* out) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Whether this transport can join the two ranks (they may be the same rank).
  virtual bool canConnect(const PeerInfo& self, const PeerInfo& peer) const = 0;
  // Whether the ranks it joins reach each other's memory (one process, or one
  // /dev/shm): the engine then puts their FIFOs in memory both map, and bridges
  // the others' over a connection.
  virtual bool sharesMemory() const { return false; }
  // Connections carry bytes between ranks that share no memory (TCP, IB);
  // a transport that shares memory has none (ncclInternalError).
  virtual Result listen(const ConnectRequest& req, std::unique_ptr<RecvEndpoint>* out);
  virtual Result connect(const ConnectRequest& req, const Blob& blob, std::unique_ptr<SendConnection>* out);
  // Called when a communicator goes away: removes what peers that died (killed
  // mid-connect, say) left behind in this transport, such as named segments.
  // `patience` > 0 (the communicator failed): a peer may still be exiting (its
  // sockets close before its process is gone), so wait up to that long for it.
  virtual void cleanUpAfterDeadPeers(const PeerInfo& self, const std::vector<PeerInfo>& peers,
                                     std::chrono::milliseconds patience) {}
};

}  // namespace braid::transports
