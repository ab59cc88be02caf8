#include "runtime/lanes/net_bridge.h"

#include <sched.h>

#include <chrono>
#include <cstring>

namespace braid {
namespace lanes {

NetBridge::~NetBridge() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void NetBridge::addSend(const exec::FifoView& fifo, SendConnection* conn, int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  sends_.push_back({fifo, conn, peer, 0});
}

void NetBridge::addRecv(const exec::FifoView& fifo, RecvConnection* conn, int peer) {
  std::lock_guard<std::mutex> lock(mu_);
  recvs_.push_back({fifo, conn, peer, 0, Result()});
}

Result NetBridge::start() {
  if (thread_.joinable()) return Result::success();
  try {
    thread_ = std::thread([this] { loop(); });
  } catch (const std::system_error& e) {
    return fail(ncclSystemError, "could not start the lanes' network proxy thread: %s", e.what());
  }
  return Result::success();
}

Result NetBridge::error() const {
  if (!failed_.load()) return Result::success();
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

Result NetBridge::waitFlushed(std::chrono::steady_clock::time_point deadline) const {
  // A pass that starts after this call and finds everything sent: two passes
  // from now, since one may be under way.
  const uint64_t want = flushedPasses_.load() + 2;
  for (unsigned polls = 0; flushedPasses_.load() < want; ++polls) {
    BRAID_TRY(error());
    if (std::chrono::steady_clock::now() > deadline)
      return fail(ncclSystemError, "timed out (BRAID_TIMEOUT) while the lanes' network proxy sent the last messages");
    if (polls < 64) sched_yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return error();
}

std::vector<std::pair<int, Result>> NetBridge::closedReceivers() const {
  std::vector<std::pair<int, Result>> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (const RecvHalf& h : recvs_)
    if (!h.closed.ok()) out.push_back({h.peer, h.closed});
  return out;
}

void NetBridge::failWith(const Result& r) {
  // Called with mu_ held (from loop).
  if (!failed_.exchange(true)) error_ = r;
}

// Forwards the lane's next posted message, if the connection has room.
bool NetBridge::pump(SendHalf& h) {
  Result r = h.conn->progress();
  if (!r.ok()) {
    failWith(r.context("lanes' network proxy, sending to rank " + std::to_string(h.peer)));
    return false;
  }
  const uint64_t m = h.forwarded + 1;
  if (int64_t(exec::loadAcquire(h.fifo.head) - m) < 0) return false;
  void* slot = h.conn->acquire();
  if (slot == nullptr) return false;
  const uint64_t bytes = h.fifo.sizes[m % h.fifo.nslots];  // stored before head's release
  memcpy(slot, h.fifo.slot(m), bytes);
  h.conn->post(bytes);
  exec::storeRelease(h.fifo.tail, m);  // the lane may reuse the slot
  h.forwarded = m;
  return true;
}

// Delivers the next arrived message, if the lane freed a slot for it.
bool NetBridge::pump(RecvHalf& h) {
  if (!h.closed.ok()) return false;
  Result r = h.conn->progress();
  if (!r.ok()) {
    // Slots that arrived before a close were delivered first (the
    // connection reports the close only once they are consumed).
    h.closed = r.context("lanes' network proxy, receiving from rank " + std::to_string(h.peer));
    return false;
  }
  const uint64_t m = h.delivered + 1;
  if (m - exec::loadAcquire(h.fifo.tail) > uint64_t(h.fifo.nslots)) return false;
  size_t bytes = 0;
  const void* data = h.conn->peek(&bytes);
  if (data == nullptr) return false;
  if (bytes > h.fifo.payloadBytes) {
    h.closed = fail(ncclInternalError, "lanes' network proxy: rank %d sent %zu bytes, more than a slot's %llu",
                    h.peer, bytes, static_cast<unsigned long long>(h.fifo.payloadBytes));
    return false;
  }
  memcpy(h.fifo.slot(m), data, bytes);
  h.fifo.sizes[m % h.fifo.nslots] = bytes;
  exec::storeRelease(h.fifo.head, m);
  h.conn->release();
  h.delivered = m;
  return true;
}

// Spins while messages move; when idle, yields, then sleeps briefly, so an
// idle communicator costs almost no CPU (yielding longer was measured slower:
// on few cores it takes the CPU from the lanes and the sockets).
void NetBridge::loop() {
  unsigned idle = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    bool moved = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (failed_.load()) break;
      bool flushed = true;
      // Each half moves all it can: a burst of slots goes out in one pass.
      for (SendHalf& h : sends_) {
        while (pump(h)) moved = true;
        flushed = flushed && exec::loadAcquire(h.fifo.head) == h.forwarded && h.conn->flushed();
      }
      for (RecvHalf& h : recvs_)
        while (pump(h)) moved = true;
      // Counted only when flushed: a pass that saw something unsent does not.
      if (flushed) flushedPasses_.fetch_add(1);
    }
    if (moved) {
      idle = 0;
    } else if (++idle < 64) {
      sched_yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(idle < 4096 ? 1 : 50));
    }
  }
}

}  // namespace lanes
}  // namespace braid
