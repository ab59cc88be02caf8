// Lane FIFOs whose peer is on another host (or whose shared memory could not
// be made): both ends keep their FIFO in local memory (bulk protocol), and the
// bridge moves each message between the FIFO and a transport connection (TCP,
// or IB) of its own: a sending half forwards what its lane posted, a
// receiving half delivers what arrived once the lane has a free slot. The
// lanes never know. Where the connection can (TCP), it sends from and
// receives into the FIFO's slots in place, so a message is never copied.
// The host runner pumps it on the thread that runs the group, between its
// lanes' turns, as the network progress of that group: no thread of its own,
// so a message crosses no thread hand-off. Plan kernels, whose lanes run on
// the GPU, have it pumped by a thread of its own (bridge_pump.h) while the
// watch thread reads its errors and a later group adds FIFOs: every member
// takes the bridge's lock (uncontended on the host runner's thread).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "kernels/executor/fifo_view.h"
#include "transports/transport.h"

namespace braid::lanes {

class NetBridge {
 public:
  // `fifo` is host memory with bulk slots; its counters start at 0. The
  // connection carries this FIFO's messages only, and outlives the bridge.
  void addSend(const executor::FifoView& fifo, transports::SendConnection* conn, int peer);
  void addRecv(const executor::FifoView& fifo, transports::RecvConnection* conn, int peer);
  // Moves what can move now; true when something did. A receiving half reads
  // its socket only with readSockets, or when its FIFO's head is among
  // `awaited` (a lane waits for its next message); otherwise it delivers
  // what already arrived: a read is a system call, which a runner polling
  // FIFOs in a tight loop makes only where it is needed, and now and then.
  bool pump(bool readSockets = true, const std::vector<const uint64_t*>& awaited = {});
  // Every message the lanes posted has left this process: a group ends only
  // then.
  bool flushed() const;
  // Why the bridge stopped moving messages (success while it works): a
  // failure to send.
  Result error() const;
  // Receiving halves whose connection closed or failed, and why: a peer that
  // finished closes its connections, so this is an error only for a lane that
  // still waits on the FIFO (the runner's watchdog decides).
  std::vector<std::pair<int, Result>> closedReceivers() const;

 private:
  struct SendHalf {
    executor::FifoView fifo;
    transports::SendConnection* conn;
    int peer;
    bool inPlace;        // the connection sends from the FIFO's slots
    uint64_t forwarded;  // messages handed to the connection
    uint64_t freed;      // in place: messages sent, so the lane may reuse their slots
  };
  struct RecvHalf {
    executor::FifoView fifo;
    transports::RecvConnection* conn;
    int peer;
    bool inPlace;        // the connection receives into the FIFO's slots
    uint64_t delivered;  // messages given to the lane
    uint64_t returned;   // in place: slots the lane consumed, given back to the connection
    Result closed;       // why the connection stopped delivering
  };

  bool pump(SendHalf& h);
  bool pump(RecvHalf& h, bool readSocket);
  static bool among(const uint64_t* head, const std::vector<const uint64_t*>& awaited);
  bool deliverNext(RecvHalf& h);
  bool deliver(RecvHalf& h, const void* data, size_t bytes, uint32_t mark);

  mutable std::mutex mu_;
  std::vector<SendHalf> sends_;
  std::vector<RecvHalf> recvs_;
  Result error_;
};

}  // namespace braid::lanes
