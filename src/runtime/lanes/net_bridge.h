// Lane FIFOs whose peer is on another host: both ends keep their FIFO in local
// memory (bulk protocol), and a proxy thread per communicator moves each
// message between the FIFO and a transport connection (TCP, or IB) of its own:
// a sending half forwards what its lane posted, a receiving half delivers
// what arrived once the lane has a free slot. The lanes never know.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/result.h"
#include "kernels/executor/fifo_view.h"
#include "transports/transport.h"

namespace braid {
namespace lanes {

class NetBridge {
 public:
  NetBridge() = default;
  ~NetBridge();  // stops the thread
  NetBridge(const NetBridge&) = delete;
  NetBridge& operator=(const NetBridge&) = delete;

  // `fifo` is host memory with bulk slots; its counters start at 0. The
  // connection carries this FIFO's messages only, and outlives the bridge.
  void addSend(const exec::FifoView& fifo, SendConnection* conn, int peer);
  void addRecv(const exec::FifoView& fifo, RecvConnection* conn, int peer);
  // Starts the thread if it does not run yet.
  Result start();
  // Why the thread stopped moving messages (success while it works): a
  // failure to send.
  Result error() const;
  // Receiving halves whose connection closed or failed, and why: a peer that
  // finished closes its connections, so this is an error only for a lane that
  // still waits on the FIFO (the runner's watchdog decides).
  std::vector<std::pair<int, Result>> closedReceivers() const;
  // Returns once every message the lanes had posted when it was called has
  // left this process (or with the bridge's error, or at `deadline`): a group
  // ends only then.
  Result waitFlushed(std::chrono::steady_clock::time_point deadline) const;

 private:
  struct SendHalf {
    exec::FifoView fifo;
    SendConnection* conn;
    int peer;
    uint64_t forwarded;  // messages handed to the connection
  };
  struct RecvHalf {
    exec::FifoView fifo;
    RecvConnection* conn;
    int peer;
    uint64_t delivered;  // messages written into the FIFO
    Result closed;       // why the connection stopped delivering
  };

  void loop();
  bool pump(SendHalf& h);
  bool pump(RecvHalf& h);
  void failWith(const Result& r);

  mutable std::mutex mu_;
  std::vector<SendHalf> sends_;
  std::vector<RecvHalf> recvs_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  // Passes the thread made that found every posted message sent.
  std::atomic<uint64_t> flushedPasses_{0};
  Result error_;  // under mu_
  std::thread thread_;
};

}  // namespace lanes
}  // namespace braid
