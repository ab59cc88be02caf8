// The low-latency protocol (fifo_view.h): 4 data bytes and a 4-byte flag per
// 8-byte line, written with one store and no fence; the receiver polls every
// line's flag. Messages go through a staging buffer of the lane's (payload
// bytes rounded up to 8): the sender packs it into lines, the receiver unpacks
// lines into it and hands the slot back at once, before its step waits to
// send (so one slot per connection cannot deadlock a ring).
#pragma once

#include "kernels/executor/fifo_view.h"

namespace braid {
namespace exec {

// Receiver: waits for every line of message port.seq+1 (`bytes` long), copies
// the data into `stage` (4-byte aligned, llLinesFor(bytes) words), then
// releases the slot. A line is consumed only once its flag is the message's:
// data and flag arrive in one 8-byte store, so a matching flag means the data
// beside it is this message's.
// `linesDone` (resumable lanes, one thread): lines already in `stage` from an
// earlier call that returned WouldBlock; updated when it returns so again.
template <class G>
BRAID_HD ExecStatus llRecv(Port& port, uint64_t bytes, uint32_t* stage, const G& g,
                           const WaitControl& w, uint64_t* linesDone = nullptr) {
  const uint64_t m = port.seq + 1;
  const uint32_t flag = uint32_t(m);
  const uint64_t* lines = reinterpret_cast<const uint64_t*>(port.fifo.slot(m));
  const uint64_t n = llLinesFor(bytes);
  ExecStatus st = ExecStatus::Ok;
  for (uint64_t i = (linesDone ? *linesDone : 0) + g.tid(); i < n && st == ExecStatus::Ok; i += g.size()) {
    uint64_t v = 0;
    st = waitUntil(w, [&] {
      v = loadRelaxed(lines + i);
      return llFlag(v) == flag;
    });
    if (st == ExecStatus::WouldBlock) {
      if (linesDone) *linesDone = i;
      return st;
    }
    stage[i] = llData(v);
  }
  st = ExecStatus(g.agree(int32_t(st)));
  if (st != ExecStatus::Ok) return st;
  if (g.tid() == 0) {
    // Release: the loads of the lines above come before the sender may
    // overwrite them.
    storeRelease(port.fifo.tail, m);
    port.seq = m;
  }
  g.sync();
  return st;
}

// Sender: writes `bytes` from `stage` (4-byte aligned, readable up to the next
// multiple of 4) as message port.seq+1 (after waitCredit).
template <class G>
BRAID_HD void llSend(Port& port, uint64_t bytes, const uint32_t* stage, const G& g) {
  const uint64_t m = port.seq + 1;
  const uint32_t flag = uint32_t(m);
  uint64_t* lines = reinterpret_cast<uint64_t*>(port.fifo.slot(m));
  const uint64_t n = llLinesFor(bytes);
  for (uint64_t i = g.tid(); i < n; i += g.size()) storeRelaxed(lines + i, llLine(stage[i], flag));
  g.sync();
  if (g.tid() == 0) port.seq = m;
  g.sync();
}

}  // namespace exec
}  // namespace braid
