// The RC data path of the ib transport: one reliable-connected queue pair per
// connection, the sender writing straight into the receiver's slots.
//
// Design
// ------
// Receiver (listen/accept): allocates its FIFO ring (nslots x slotBytes, page
// aligned), registers it for remote write through the connection's MrCache,
// creates a CQ and an RC QP, and puts in its blob the QP address (QPN, PSN,
// LID, GID, MTU), the ring's address and rkey, and a handshake socket. At
// accept it learns the sender's QP address and credit word from the handshake,
// brings its QP to RTS, pre-posts nslots zero-length receive WRs (one per slot
// that may be in flight) and then writes its first credit.
//
// Sender (connect): allocates [control page | nslots staging slots], registers
// the whole buffer once (the credit word in the control page must be remotely
// writable; the staging slots are the local source of the writes), creates its
// CQ and QP, brings the QP to RTS from the blob, and sends its own QP address
// and the credit word's address/rkey over the handshake socket. It does not
// block on the receiver (the three-phase connect runs every connect() before
// any accept()): it simply has no credit until the receiver is ready.
//
// Slots: the sender fills staging slot (seq % nslots) and posts one
// IBV_WR_RDMA_WRITE_WITH_IMM of the slot's bytes to receiver slot (seq %
// nslots); the immediate is the byte count (network order). RC delivers in
// order, so the receiver's receive completions arrive in slot order: the n-th
// one says slot n % nslots holds imm bytes. Each consumed receive WR is
// re-posted when its completion is polled.
//
// Credits: the sender's credit word holds "the sender may post slots with seq
// below this value" = released + nslots, written by the receiver with an
// inline 8-byte IBV_WR_RDMA_WRITE (inline: the value is copied at post time,
// so later updates cannot race the DMA). It starts at 0 and the receiver's
// first write (nslots) is also its "I am at RTR with receives posted" signal.
// Credits go back in batches of nslots/4 releases; a batch is always complete
// when the sender is blocked (it then has nslots un-credited slots, all of
// which the receiver will release), so batching cannot deadlock. A credit also
// proves the staging slot was read by the HCA, so the sender reuses staging
// slots under the same limit. Never more than nslots un-credited slots are in
// flight, so nslots posted receives always suffice.
//
// Send queues: a WR occupies its send-queue entry until a signalled WR at or
// after it completes, so each side signals every S-th WR and never has more
// than its queue depth (>= S) outstanding; the WR id is the WR's position, so
// a completion retires everything up to it. flushed() must know when the last
// write left the staging buffer, so when the sender goes idle with unsignalled
// writes outstanding, progress() posts a signalled zero-length RDMA write as a
// marker (RC completes in order).
//
// Errors: a completion with status != IBV_WC_SUCCESS becomes ncclRemoteError
// (the peer or fabric: remote access, retries exhausted, ...) or
// ncclSystemError (local), naming the peer and the status (ib_completion.h);
// a failing ibv_post_* is ncclSystemError. The handshake socket stays open
// for the connection's life: checkPeer() reports its EOF (the peer exited)
// sooner than the QP's retry timeout would.
//
// Not here: GPUDirect RDMA (slots are host memory), shared receive queues,
// adaptive routing, multiple QPs per connection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/unique_fd.h"
#include "transports/ib/ib_device.h"
#include "transports/ib/ib_mr_cache.h"
#include "transports/ib/ib_qp.h"
#include "transports/transport.h"

namespace braid::ib {

constexpr uint32_t kInlineBytes = 16;   // room for the 8-byte credit
constexpr size_t kControlBytes = 4096;  // the sender's control page (credit word)

// The verbs objects and registered memory of one end. Members are declared so
// that destruction runs QP, CQ, registrations, memory, device: nothing is
// deregistered or freed while a QP could still touch it.
class IbQpResources {
 public:
  struct Shape {
    size_t controlBytes = 0;  // page-aligned prefix before the ring
    size_t ringBytes = 0;
    uint32_t sendDepth = 0;
    uint32_t recvDepth = 0;
  };
  static Result create(std::shared_ptr<IbDevice> device, const Shape& shape,
                       std::unique_ptr<IbQpResources>* out);
  ~IbQpResources();

  uint8_t* control() const { return buffer_.data(); }
  uint8_t* ring() const { return buffer_.data() + controlBytes_; }
  // Keys of [addr, addr + bytes) inside the buffer, from the cache (a hit).
  Result keys(const void* addr, size_t bytes, MrKeys* out);
  const MrCache& cache() const { return *cache_; }
  IbvQp* qp() const { return qp_.get(); }
  IbvCq* cq() const { return cq_.get(); }
  const QpLocal& local() const { return local_; }
  IbDevice& device() const { return *device_; }
  // This end's QP address, as the peer needs it.
  IbConnInfo address() const;

 private:
  IbQpResources() = default;
  std::shared_ptr<IbDevice> device_;
  AlignedBuffer buffer_;
  size_t controlBytes_ = 0;
  std::unique_ptr<VerbsMrRegistrar> registrar_;
  std::unique_ptr<MrCache> cache_;
  CompletionQueue cq_;
  QueuePair qp_;
  QpLocal local_;
};

// Send-queue occupancy: which WRs to signal and when the queue is full.
class SendQueueWindow {
 public:
  SendQueueWindow(uint32_t depth, uint32_t signalEvery)
      : depth_(depth), signalEvery_(signalEvery ? signalEvery : 1) {}
  bool full() const { return posted_ - completed_ >= depth_; }
  // Whether the next WR (id = nextId()) is signalled, `force` aside.
  bool signalNext(bool force) const { return force || posted_ % signalEvery_ == signalEvery_ - 1; }
  uint64_t nextId() const { return posted_; }
  void posted(bool signalled) {
    ++posted_;
    if (signalled) lastSignalled_ = posted_;
  }
  void completed(uint64_t wrId) {
    if (wrId + 1 > completed_) completed_ = wrId + 1;
  }
  bool drained() const { return completed_ == posted_; }
  bool tailUnsignalled() const { return lastSignalled_ < posted_; }

 private:
  uint32_t depth_;
  uint32_t signalEvery_;
  uint64_t posted_ = 0, completed_ = 0, lastSignalled_ = 0;
};

// Where the sender writes: the receiver's ring.
struct RemoteRing {
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

// Where the receiver writes credits: the sender's word.
struct RemoteCredit {
  uint64_t addr = 0;
  uint32_t rkey = 0;
};

// Each slot carries its payload and then the sender's 4-byte mark
// (SendConnection::post), written by the same RDMA write: the immediate
// holds only the size. Slots are kept 64-byte aligned.
constexpr size_t kMarkBytes = sizeof(uint32_t);
inline size_t slotStride(size_t slotBytes) { return (slotBytes + kMarkBytes + 63) / 64 * 64; }
inline size_t ringBytes(const transports::ConnectRequest& req) {
  return slotStride(req.slotBytes) * static_cast<size_t>(req.nslots);
}

class IbSend final : public transports::SendConnection {
 public:
  // `res` is at RTS; `handshake` is the socket the hello went over.
  static Result create(std::unique_ptr<IbQpResources> res, UniqueFd handshake, const RemoteRing& ring,
                       const transports::ConnectRequest& req, std::unique_ptr<IbSend>* out);
  void* acquire() override;
  // Never in place (no useSlots): `from` is not used.
  void post(size_t bytes, uint32_t mark = 0, const void* from = nullptr) override;
  Result progress() override;
  bool flushed() const override;
  Result checkPeer() override;

  const IbQpResources& resources() const { return *res_; }

 private:
  IbSend() = default;
  uint64_t creditLimit() const { return __atomic_load_n(credit_, __ATOMIC_ACQUIRE); }
  Result postMarker();

  std::unique_ptr<IbQpResources> res_;
  UniqueFd handshake_;
  RemoteRing ring_;
  std::string peer_;
  size_t slotBytes_ = 0;
  size_t stride_ = 0;  // slotStride(slotBytes_)
  uint32_t nslots_ = 0;
  uint32_t lkey_ = 0;
  uint64_t* credit_ = nullptr;  // in the control page, written by the receiver
  uint64_t posted_ = 0;
  uint64_t postedAtLastProgress_ = 0;
  std::unique_ptr<SendQueueWindow> sq_;
  Result error_;
};

class IbRecv final : public transports::RecvConnection {
 public:
  // `res` is at RTS: posts the receives, then writes the first credit.
  static Result create(std::unique_ptr<IbQpResources> res, UniqueFd handshake, const RemoteCredit& credit,
                       const transports::ConnectRequest& req, std::unique_ptr<IbRecv>* out);
  const void* peek(size_t* bytes, uint32_t* mark = nullptr) override;
  void release() override;
  Result progress() override;
  Result checkPeer() override;

  const IbQpResources& resources() const { return *res_; }

 private:
  IbRecv() = default;
  Result postReceive();
  Result sendCredit();

  std::unique_ptr<IbQpResources> res_;
  UniqueFd handshake_;
  RemoteCredit credit_;
  std::string peer_;
  size_t slotBytes_ = 0;
  size_t stride_ = 0;  // slotStride(slotBytes_)
  uint32_t nslots_ = 0;
  uint32_t creditBatch_ = 1;
  std::vector<uint32_t> sizes_;  // by slot: bytes the sender wrote
  uint64_t arrived_ = 0, released_ = 0, credited_ = 0;
  bool creditPending_ = false;
  std::unique_ptr<SendQueueWindow> sq_;
  Result error_;
};

// Send-queue depth and signalling period of the sender for `nslots`.
uint32_t senderQueueDepth(uint32_t nslots);
uint32_t senderSignalEvery(uint32_t nslots);
constexpr uint32_t kReceiverQueueDepth = 32;

// ncclRemoteError naming `peer` if the socket saw EOF or a reset.
Result checkHandshakeSocket(int fd, const std::string& peer);

}  // namespace braid::ib
