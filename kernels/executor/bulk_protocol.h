// The bulk protocol (fifo_view.h): the receiver reads and the sender writes
// the slot in place; one counter per message, published after a fence.
#pragma once

#include <cstring>

#include "kernels/executor/fifo_view.h"

namespace braid::executor {

// By-reference messages (fifo_view.h: kMessageByReference) exist between a
// host lane and its process's network bridge only; a block never makes or
// takes one, and its code has none of their branches.
#if defined(__CUDA_ARCH__)
constexpr bool kByReference = false;
#else
constexpr bool kByReference = true;
#endif

// Receiver: waits for message port.seq+1 and checks that it belongs to the
// operation `fingerprint` names and holds `bytes`; *word gets the message's
// word (what a mismatch reports). A head seen earlier that already covers it
// saves the load (Port::seen). *data is the slot, or for a message by
// reference the bytes its slot points at.
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
  uint64_t got = 0;
  if (st == ExecStatus::Ok) {
    got = f.sizes[m % f.nslots];
    if (word) *word = got;
    if (messageFingerprint(got) != fingerprint) {
      st = ExecStatus::FingerprintMismatch;
    } else if (messageBytes(got) != bytes) {
      st = ExecStatus::SizeMismatch;
    }
  }
  *data = f.slot(m);
  if (kByReference && st == ExecStatus::Ok && messageByReference(got))
    memcpy(data, f.slot(m), sizeof(*data));
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

// Sender, host only: publishes message port.seq+1 as a reference to `bytes`
// at `data` (a user buffer): the slot holds the pointer, and the bridge sends
// the bytes from there. They stay as they are until the slot comes back (the
// lane program's writes never touch them: zero_copy.h), so no lane copies them.
template <class G>
BRAID_HD void bulkPostReference(Port& port, uint64_t bytes, uint32_t fingerprint, const char* data, const G& g) {
  fenceSystem();  // what the step wrote there, before the bridge reads it
  g.sync();
  if (g.tid() == 0) {
    const uint64_t m = port.seq + 1;
    memcpy(port.fifo.slot(m), &data, sizeof data);
    port.fifo.sizes[m % port.fifo.nslots] = messageWord(bytes, fingerprint, true);
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
