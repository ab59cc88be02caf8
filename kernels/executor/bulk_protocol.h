// The bulk protocol (fifo_view.h): the receiver reads and the sender writes
// the slot in place; one counter per message, published after a fence.
#pragma once

#include "kernels/executor/fifo_view.h"

namespace braid::executor {

// Receiver: waits for message port.seq+1 and checks that it belongs to the
// operation `fingerprint` names and holds `bytes`; *word gets the message's
// word (what a mismatch reports). A head seen earlier that already covers it
// saves the load (Port::seen).
template <class G>
BRAID_HD ExecStatus bulkWaitRecv(Port& port, uint64_t bytes, uint32_t fingerprint, const char** data,
                                 const G& g, const WaitControl& w, uint64_t* word = nullptr) {
  const uint64_t m = port.seq + 1;
  const FifoView& f = port.fifo;
  uint64_t head = port.seen;
  ExecStatus st = ExecStatus::Ok;
  if (int64_t(head - m) < 0) {
    st = ExecStatus(g.agree(int32_t(waitUntil(w, [&] {
      head = loadAcquire(f.head);
      return int64_t(head - m) >= 0;
    }))));
    if (st == ExecStatus::Ok && g.tid() == 0) port.seen = head;
  }
  // The word was stored before head's release, so the acquire above covers it.
  if (st == ExecStatus::Ok) {
    const uint64_t got = f.sizes[m % f.nslots];
    if (word) *word = got;
    if (messageFingerprint(got) != fingerprint) {
      st = ExecStatus::FingerprintMismatch;
    } else if (messageBytes(got) != bytes) {
      st = ExecStatus::SizeMismatch;
    }
  }
  *data = f.slot(m);
  return ExecStatus(g.agree(int32_t(st)));
}

// Sender: the slot of message port.seq+1 (after waitCredit).
BRAID_HD inline char* bulkSlot(const Port& port) { return port.fifo.slot(port.seq + 1); }

// Sender: publishes the slot every thread has written, as a message of the
// operation `fingerprint` names. Each thread fences its own writes; after the
// barrier one thread stores the message's word, then head.
template <class G>
BRAID_HD void bulkPost(Port& port, uint64_t bytes, uint32_t fingerprint, const G& g) {
  fenceSystem();
  g.sync();
  if (g.tid() == 0) {
    const uint64_t m = port.seq + 1;
    port.fifo.sizes[m % port.fifo.nslots] = messageWord(bytes, fingerprint);
    storeRelease(port.fifo.head, m);
    port.seq = m;
  }
  g.sync();
}

// Receiver: hands the slot back once no thread reads it any more.
template <class G>
BRAID_HD void bulkRelease(Port& port, const G& g) {
  g.sync();
  if (g.tid() == 0) {
    const uint64_t m = port.seq + 1;
    storeRelease(port.fifo.tail, m);
    port.seq = m;
  }
  g.sync();
}

}  // namespace braid::executor
