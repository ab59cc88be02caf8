// Lane FIFOs whose peer is on another host (or whose shared memory could not
// be made): both ends keep their FIFO in local memory (bulk protocol), and the
// bridge moves each message between the FIFO and a transport connection (TCP,
// or IB) of its own: a sending half forwards what its lane posted, a
// receiving half delivers what arrived once the lane has a free slot. The
// lanes never know. Where the connection can (TCP), it sends from and
// receives into the FIFO's slots in place, so a message is never copied.
// The host runner goes further (zero_copy.h): a lane may post a message by
// reference to the user buffer that holds its bytes, which the bridge sends
// from there, and a message the lane will only copy into a user buffer is
// received straight into it (receiveInPlace) and delivered by reference.
// The host runner pumps it on the thread that runs the group, between its
// lanes' turns, as the network progress of that group: no thread of its own,
// so a message crosses no thread hand-off. Plan kernels, whose lanes run on
// the GPU, have it pumped by a thread of its own (bridge_pump.h) while the
// watch thread reads its errors and a later group adds FIFOs: every member
// takes the bridge's lock (uncontended on the host runner's thread).
#pragma once

#include <cstdint>
#include <deque>
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

  // Whether the FIFO whose head counter is `head` is one of this bridge's.
  bool bridges(const uint64_t* head) const;
  // Messages delivered so far to the receiving FIFO whose head is `head`.
  uint64_t delivered(const uint64_t* head) const;
  // Message `message` of the receiving FIFO whose head is `head` goes to
  // `at` (`bytes` of user memory nothing else touches until the lane took
  // it) instead of its slot, where it has not begun to arrive and is that
  // long; the lane then finds it there by reference. With `afterHead`, its
  // step overwrites the bytes message `afterMessage` of that sending FIFO
  // is sent from by reference: it is placed only once that one has left,
  // and delivered only once it was posted and has left, or was copied
  // back into its slot (`at` may then be null: held back, not placed).
  // Replaces every earlier placement; in increasing message order per FIFO.
  struct Placement {
    const uint64_t* head;
    uint64_t message;
    char* at;
    uint64_t bytes;
    const uint64_t* afterHead;
    uint64_t afterMessage;
  };
  void receiveInPlace(const std::vector<Placement>& placements);
  // The run that posted references and placed messages failed: no user
  // memory is read or written any more, and nothing more moves (`why`).
  void abandon(const Result& why);

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
    std::deque<Placement> placements;  // receiveInPlace's not yet delivered, by message
    size_t given = 0;  // in place: how many of them the connection was told (receiveInto)
  };

  bool pump(SendHalf& h);
  bool pump(RecvHalf& h, bool readSocket);
  static bool among(const uint64_t* head, const std::vector<const uint64_t*>& awaited);
  bool deliverNext(RecvHalf& h);
  bool deliver(RecvHalf& h, const void* data, size_t bytes, uint32_t mark, const Placement* p);
  const Placement* placementOf(RecvHalf& h, uint64_t message);
  void givePlacements(RecvHalf& h);
  // The half of `halves` whose FIFO's head is `head`, or null.
  template <class Half>
  static Half* halfOf(std::vector<Half>& halves, const uint64_t* head) {
    for (Half& h : halves)
      if (h.fifo.head == head) return &h;
    return nullptr;
  }
  template <class Half>
  static const Half* halfOf(const std::vector<Half>& halves, const uint64_t* head) {
    return halfOf(const_cast<std::vector<Half>&>(halves), head);
  }
  void forgetPlacements();
  bool left(const uint64_t* head, uint64_t message);
  bool release(const uint64_t* head, uint64_t message);

  mutable std::mutex mu_;
  std::vector<SendHalf> sends_;
  std::vector<RecvHalf> recvs_;
  Result error_;
};

}  // namespace braid::lanes
