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
  recvs_.push_back({fifo, conn, peer, conn->useSlots(slotsOf(fifo)), 0, 0, Result(), {}});
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

bool NetBridge::bridges(const uint64_t* head) const {
  std::lock_guard<std::mutex> lock(mu_);
  return halfOf(sends_, head) != nullptr || halfOf(recvs_, head) != nullptr;
}

uint64_t NetBridge::delivered(const uint64_t* head) const {
  std::lock_guard<std::mutex> lock(mu_);
  const RecvHalf* h = halfOf(recvs_, head);
  return h != nullptr ? h->delivered : 0;
}

void NetBridge::forgetPlacements() {
  for (RecvHalf& h : recvs_) {
    h.placements.clear();
    h.given = 0;
    h.conn->forgetDestinations();
  }
}

void NetBridge::receiveInPlace(const std::vector<Placement>& placements) {
  std::lock_guard<std::mutex> lock(mu_);
  forgetPlacements();
  RecvHalf* h = nullptr;
  for (const Placement& p : placements) {
    if (h == nullptr || h->fifo.head != p.head) h = halfOf(recvs_, p.head);
    if (h != nullptr) h->placements.push_back(p);
  }
}

void NetBridge::abandon(const Result& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_.ok()) error_ = why.ok() ? fail(ncclInternalError, "network bridge abandoned") : why;
  forgetPlacements();
}

// Whether message `message` of the sending FIFO whose head is `head` has
// left this process.
bool NetBridge::left(const uint64_t* head, uint64_t message) {
  const SendHalf* h = halfOf(sends_, head);
  if (h == nullptr) return true;
  return h->forwarded >= message && (!h->inPlace || h->conn->sentSlots() >= message);
}

// Frees the user bytes message `message` of that sending FIFO is sent from
// by reference, for a message about to overwrite them: false while the lane
// has not posted it yet (it does before it takes the overwriting one); else
// what has not left yet is copied back into its slot.
bool NetBridge::release(const uint64_t* head, uint64_t message) {
  SendHalf* h = halfOf(sends_, head);
  if (h == nullptr) return true;
  if (int64_t(executor::loadAcquire(h->fifo.head) - message) < 0) return false;
  if (h->forwarded < message) {
    char* slot = h->fifo.slot(message);
    uint64_t& word = h->fifo.sizes[message % h->fifo.nslots];
    if (executor::messageByReference(word)) {
      const char* from = nullptr;
      memcpy(&from, slot, sizeof from);
      memcpy(slot, from, executor::messageBytes(word));
      word = executor::messageWord(executor::messageBytes(word), executor::messageFingerprint(word));
    }
  } else if (h->inPlace) {
    h->conn->detach(message - 1);
  }
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
  // travels as the connection's mark. By reference, the slot holds where
  // its bytes are.
  const uint64_t word = h.fifo.sizes[m % h.fifo.nslots];
  const uint64_t bytes = executor::messageBytes(word);
  const char* from = h.fifo.slot(m);
  if (executor::messageByReference(word)) memcpy(&from, from, sizeof from);
  if (!h.inPlace) memcpy(slot, from, bytes);
  h.conn->post(bytes, executor::messageFingerprint(word), h.inPlace ? from : nullptr);
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
  if (h.inPlace) givePlacements(h);
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

// In place: tells the connection the placements it may read into now, in
// order, up to one that waits for the reference it overwrites to leave.
void NetBridge::givePlacements(RecvHalf& h) {
  for (; h.given < h.placements.size(); ++h.given) {
    const Placement& p = h.placements[h.given];
    if (p.at == nullptr) continue;
    if (p.afterHead != nullptr && !left(p.afterHead, p.afterMessage)) return;
    // The connection's slot k carries message k + 1 (slotsOf).
    h.conn->receiveInto(p.message - 1, p.at, p.bytes);
  }
}

// The placement (or hold) of message `message`, if any; those of earlier
// messages are gone by.
const NetBridge::Placement* NetBridge::placementOf(RecvHalf& h, uint64_t message) {
  while (!h.placements.empty() && h.placements.front().message < message) {
    h.placements.pop_front();
    if (h.given > 0) --h.given;
  }
  return !h.placements.empty() && h.placements.front().message == message ? &h.placements.front() : nullptr;
}

bool NetBridge::deliverNext(RecvHalf& h) {
  size_t bytes = 0;
  uint32_t mark = 0;
  const void* data = nullptr;
  if (h.inPlace) {
    data = h.conn->arrived(h.delivered, &bytes, &mark);
  } else if (h.delivered + 1 - executor::loadAcquire(h.fifo.tail) <= uint64_t(h.fifo.nslots)) {
    data = h.conn->peek(&bytes, &mark);
  }
  if (data == nullptr) return false;
  const Placement* p = placementOf(h, h.delivered + 1);
  if (p != nullptr && p->afterHead != nullptr && !release(p->afterHead, p->afterMessage)) return false;
  if (!deliver(h, data, bytes, mark, p)) return false;
  if (!h.inPlace) h.conn->release();
  return true;
}

// Gives message delivered+1 (in `data`: the FIFO slot itself in place, or
// where the connection received it) to the lane, with the fingerprint its
// sender's lane stamped on it (`mark`). A message not in its slot goes by
// reference: received in place, or (copied halves) copied to its placement.
bool NetBridge::deliver(RecvHalf& h, const void* data, size_t bytes, uint32_t mark, const Placement* p) {
  if (bytes > h.fifo.payloadBytes) {
    h.closed = fail(ncclInternalError, "network bridge: rank %d sent %zu bytes, more than a slot's %llu", h.peer,
                    bytes, static_cast<unsigned long long>(h.fifo.payloadBytes));
    return false;
  }
  const uint64_t m = h.delivered + 1;
  char* slot = h.fifo.slot(m);
  const char* placed = nullptr;  // where the lane finds the bytes, when not in its slot
  if (h.inPlace) {
    if (data != slot) placed = static_cast<const char*>(data);
  } else if (p != nullptr && p->at != nullptr && p->bytes == bytes) {
    memcpy(p->at, data, bytes);
    placed = p->at;
  } else {
    memcpy(slot, data, bytes);
  }
  if (placed != nullptr) memcpy(slot, &placed, sizeof placed);
  h.fifo.sizes[m % h.fifo.nslots] = executor::messageWord(bytes, mark, placed != nullptr);
  executor::storeRelease(h.fifo.head, m);
  h.delivered = m;
  return true;
}

}  // namespace braid::lanes
