// The low-latency protocol (fifo_view.h): 4 data bytes and a 4-byte flag per
// 8-byte line, written with one store and no fence; the receiver polls every
// line's flag. Line 0 of a message carries its operation's fingerprint. Messages go through a staging buffer of the lane's (payload
// bytes rounded up to 8): the sender packs it into lines, the receiver unpacks
// lines into it and hands the slot back at once, before its step waits to
// send (so one slot per connection cannot deadlock a ring).
#pragma once

#include "kernels/executor/fifo_view.h"

namespace braid::executor {

// Receiver: waits for message port.seq+1 (`bytes` long): first its header
// line, whose fingerprint must be `fingerprint` (else FingerprintMismatch,
// with the one it carries in *got), then every data line, copied into `stage`
// (4-byte aligned, llLinesFor(bytes) words); then releases the slot. A line
// is consumed only once its flag is the message's: data and flag arrive in one
// 8-byte store, so a matching flag means the data beside it is this message's.
// Every thread reads the header before any data line: a message of another
// operation may be shorter, and no thread may wait for lines it never gets.
// `linesDone` (resumable lanes, one thread): lines already taken (the header
// counts) by an earlier call that returned WouldBlock; updated when it
// returns so again.
template <class G>
BRAID_HD ExecStatus llRecv(Port& port, uint64_t bytes, uint32_t fingerprint, uint32_t* stage, const G& g,
                           const WaitControl& w, uint64_t* linesDone = nullptr, uint32_t* got = nullptr) {
  const uint64_t m = port.seq + 1;
  const uint32_t flag = uint32_t(m);
  const uint64_t* lines = reinterpret_cast<const uint64_t*>(port.fifo.slot(m));
  const uint64_t n = llMessageLines(bytes);
  uint64_t first = linesDone ? *linesDone : 0;
  ExecStatus st = ExecStatus::Ok;
  if (first == 0) {
    uint64_t header = 0;
    st = waitUntil(w, [&] {
      header = loadRelaxed(lines);
      return llFlag(header) == flag;
    });
    if (st == ExecStatus::Ok && llData(header) != fingerprint) {
      if (got && g.tid() == 0) *got = llData(header);
      st = ExecStatus::FingerprintMismatch;
    }
    if (st != ExecStatus::Ok) return ExecStatus(g.agree(int32_t(st)));
    first = 1;
  }
  for (uint64_t i = first + g.tid(); i < n && st == ExecStatus::Ok; i += g.size()) {
    uint64_t v = 0;
    st = waitUntil(w, [&] {
      v = loadRelaxed(lines + i);
      return llFlag(v) == flag;
    });
    if (st == ExecStatus::WouldBlock) {
      if (linesDone) *linesDone = i;
      return st;
    }
    stage[i - 1] = llData(v);
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
// multiple of 4) as message port.seq+1 of the operation `fingerprint` names
// (after waitCredit).
template <class G>
BRAID_HD void llSend(Port& port, uint64_t bytes, uint32_t fingerprint, const uint32_t* stage, const G& g) {
  const uint64_t m = port.seq + 1;
  const uint32_t flag = uint32_t(m);
  uint64_t* lines = reinterpret_cast<uint64_t*>(port.fifo.slot(m));
  const uint64_t n = llMessageLines(bytes);
  for (uint64_t i = 1 + g.tid(); i < n; i += g.size()) storeRelaxed(lines + i, llLine(stage[i - 1], flag));
  // The header last: a receiver that sees it mostly finds the data lines
  // there too (in one cache line for small messages) instead of polling each
  // as it arrives. Each line's flag still vouches for that line alone.
  g.sync();
  if (g.tid() == 0) {
    storeRelaxed(lines, llLine(fingerprint, flag));
    port.seq = m;
  }
  g.sync();
}

}  // namespace braid::executor
