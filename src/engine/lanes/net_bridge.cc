#include "engine/lanes/net_bridge.h"

#include <cstring>

namespace braid::lanes {

namespace {

// Message m (from 1) of a bridged FIFO is in slot m % nslots: the
// connection's slot k = m - 1.
transports::SlotMemory slotsOf(const executor::FifoView& f) {
  return {reinterpret_cast<uint8_t*>(f.slots), f.slotStride, f.nslots, 1};
}

}  // namespace

void NetBridge::addSend(const executor::FifoView& fifo, transports::SendConnection* conn, int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  sends_.push_back({fifo, conn, peer, conn->useSlots(slotsOf(fifo)), 0, 0});
}

void NetBridge::addRecv(const executor::FifoView& fifo, transports::RecvConnection* conn, int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  recvs_.push_back({fifo, conn, peer, conn->useSlots(slotsOf(fifo)), 0, 0, Result()});
}

Result NetBridge::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::vector<std::pair<int, Result>> NetBridge::closedReceivers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<int, Result>> out;
  for (const RecvHalf& h : recvs_)
    if (!h.closed.ok()) out.push_back({h.peer, h.closed});
  return out;
}

bool NetBridge::flushed() const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const SendHalf& h : sends_)
    if (executor::loadAcquire(h.fifo.head) != h.forwarded || !h.conn->flushed()) return false;
  return true;
}

bool NetBridge::among(const uint64_t* head, const std::vector<const uint64_t*>& awaited) {
  for (const uint64_t* a : awaited)
    if (a == head) return true;
  return false;
}

bool NetBridge::pump(bool readSockets, const std::vector<const uint64_t*>& awaited) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!error_.ok()) return false;
  bool moved = false;
  // Each half moves all it can: a burst of slots goes out in one pass.
  for (SendHalf& h : sends_)
    while (pump(h)) moved = true;
  for (RecvHalf& h : recvs_) moved = pump(h, readSockets || among(h.fifo.head, awaited)) || moved;
  return moved;
}

// Forwards the lane's next posted message, if the connection has room; in
// place, hands back the slots the connection has sent.
bool NetBridge::pump(SendHalf& h) {
  Result r = h.conn->progress();
  if (!r.ok()) {
    error_ = r.context("network bridge, sending to rank " + std::to_string(h.peer));
    return false;
  }
  bool moved = false;
  if (h.inPlace && h.conn->sentSlots() != h.freed) {
    h.freed = h.conn->sentSlots();
    executor::storeRelease(h.fifo.tail, h.freed);  // the lane may reuse their slots
    moved = true;
  }
  const uint64_t m = h.forwarded + 1;
  if (int64_t(executor::loadAcquire(h.fifo.head) - m) < 0) return moved;
  void* slot = h.conn->acquire();
  if (slot == nullptr) return moved;
  // The message's word was stored before head's release; its fingerprint
  // travels as the connection's mark.
  const uint64_t word = h.fifo.sizes[m % h.fifo.nslots];
  const uint64_t bytes = executor::messageBytes(word);
  if (!h.inPlace) memcpy(slot, h.fifo.slot(m), bytes);
  h.conn->post(bytes, executor::messageFingerprint(word));
  if (!h.inPlace) executor::storeRelease(h.fifo.tail, m);  // copied: the lane may reuse the slot
  h.forwarded = m;
  return true;
}

// Delivers the next arrived message, if the lane freed a slot for it.
// Delivers what arrived, as far as the lane has free slots. The socket is
// read once per call: one read takes in everything there is room for, and a
// second would only say EAGAIN.
bool NetBridge::pump(RecvHalf& h, bool readSocket) {
  if (!h.closed.ok()) return false;
  bool moved = false;
  // In place, the slots the lane consumed go back to the connection to read into.
  if (h.inPlace)
    for (const uint64_t tail = executor::loadAcquire(h.fifo.tail); h.returned < tail; ++h.returned, moved = true)
      h.conn->release();
  if (readSocket) {
    Result r = h.conn->progress();
    if (!r.ok()) {
      // Slots that arrived before a close were delivered first (the
      // connection reports the close only once they are consumed).
      h.closed = r.context("network bridge, receiving from rank " + std::to_string(h.peer));
      return moved;
    }
  }
  while (deliverNext(h)) moved = true;
  return moved;
}

bool NetBridge::deliverNext(RecvHalf& h) {
  size_t bytes = 0;
  uint32_t mark = 0;
  if (h.inPlace) {
    const void* data = h.conn->arrived(h.delivered, &bytes, &mark);
    return data != nullptr && deliver(h, data, bytes, mark);
  }
  if (h.delivered + 1 - executor::loadAcquire(h.fifo.tail) > uint64_t(h.fifo.nslots)) return false;
  const void* data = h.conn->peek(&bytes, &mark);
  if (data == nullptr || !deliver(h, data, bytes, mark)) return false;
  h.conn->release();
  return true;
}

// Gives message delivered+1 (in `data`, the FIFO slot itself in place) to the
// lane, with the fingerprint its sender's lane stamped on it (`mark`).
bool NetBridge::deliver(RecvHalf& h, const void* data, size_t bytes, uint32_t mark) {
  if (bytes > h.fifo.payloadBytes) {
    h.closed = fail(ncclInternalError, "network bridge: rank %d sent %zu bytes, more than a slot's %llu", h.peer,
                    bytes, static_cast<unsigned long long>(h.fifo.payloadBytes));
    return false;
  }
  const uint64_t m = h.delivered + 1;
  if (!h.inPlace) memcpy(h.fifo.slot(m), data, bytes);
  h.fifo.sizes[m % h.fifo.nslots] = executor::messageWord(bytes, mark);
  executor::storeRelease(h.fifo.head, m);
  h.delivered = m;
  return true;
}

}  // namespace braid::lanes
