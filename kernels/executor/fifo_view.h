// One direction of a connection as the plan interpreter sees it: nslots slots
// and two 64-bit counters in memory both ends can reach (host memory for the
// CPU tests; device or mapped memory for the kernels). Which protocol fills
// the slots is fixed per FIFO:
//
//   Bulk: a slot is raw bytes. The sender writes them, fences, stores the
//         message's word (its size and its operation's fingerprint), then
//         `head` (messages posted) with release ordering; the receiver polls
//         `head` with acquire ordering.
//   LL:   a slot is an array of 8-byte lines {uint32 data, uint32 flag}. The
//         sender writes each line in ONE 8-byte store with flag = the message's
//         sequence number (truncated to 32 bits), no fence; the receiver polls
//         each line until its flag is the one it expects. Flags are never
//         reset: message m+nslots reuses m's slot with a different flag. Line
//         0 is a header whose data is the operation's fingerprint.
//
// The fingerprint (32 bits) names the operation a message belongs to: every
// rank derives it alike from what the ranks must agree on (the call, its
// number, the plan), and a receiver checks it before it uses the data, so
// ranks that called different things fail instead of mixing their data.
//
// Both: the receiver stores `tail` (messages consumed) with release ordering
// once it no longer reads the slot; the sender waits, with acquire, for
// `m - tail <= nslots` before writing message m. Messages are numbered from
// base+1, where `base` is the value both counters start at (0 normally; the
// tests start near 2^32 so that the LL flags wrap).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/executor/device_memory_model.h"

namespace braid::executor {

enum class Protocol : uint32_t { Bulk = 0, LL = 1 };

// How a lane's run ended. Larger is worse: a group of threads reports the
// largest code any of them saw (Group::agree).
enum class ExecStatus : int32_t {
  // A resumable lane (WaitControl::resumable, one host thread) reached a wait
  // that is not ready: it kept its place and runs on when called again.
  WouldBlock = -1,
  Ok = 0,
  SizeMismatch = 1,  // bulk: the sender posted another size than the step expects
  BadStep = 2,       // a step larger than a slot, or naming a port the lane lacks
  TimedOut = 3,      // a wait reached WaitControl::maxPolls
  Aborted = 4,       // the abort word became non-zero during a wait
  // The message carries another operation's fingerprint: the ranks called
  // different things. Worst: it is why the others end.
  FingerprintMismatch = 5,
};

BRAID_HD inline const char* execStatusName(ExecStatus s) {
  switch (s) {
    case ExecStatus::WouldBlock: return "would block";
    case ExecStatus::Ok: return "ok";
    case ExecStatus::SizeMismatch: return "size mismatch";
    case ExecStatus::BadStep: return "bad step";
    case ExecStatus::TimedOut: return "timed out";
    case ExecStatus::Aborted: return "aborted";
    case ExecStatus::FingerprintMismatch: return "fingerprint mismatch";
  }
  return "?";
}

// Every wait loop polls `abortFlag` (when not null) and `stopFlag` (when not
// null: the failure word of the lanes that run together, which a lane that
// fails raises, so that its peers end instead of waiting for it for ever) and
// gives up after `maxPolls` polls (0: never; production relies on the words).
// `resumable`: a wait that is not ready returns WouldBlock at once instead of
// polling, so that one host thread can take turns over many lanes (the host
// runner); a CUDA block runs its lane to the end and never sets it.
//
// `beacon` (when not null): where a lane shows a host watchdog that cannot
// read the lane's own memory (a plan kernel's, in device memory) where it is,
// in host-visible memory: the interpreter writes it at each step, each wait
// and the lane's end, and every wait loop beats it at each abort check.
struct LaneBeacon;
struct WaitControl {
  const uint32_t* abortFlag = nullptr;
  const uint32_t* stopFlag = nullptr;
  uint64_t maxPolls = 0;
  bool resumable = false;
  LaneBeacon* beacon = nullptr;
};

// What a lane publishes through WaitControl::beacon. `beats` changes while the
// lane polls a wait (each thread stores its poll count there), so a reader
// that sees it change between two looks, at the same step and wait, knows
// that the lane still waits for that message; one that sees it still may be
// computing. `ended` is 0 while the lane runs, then 1 + its ExecStatus
// (written last, with release ordering), with `step` its failed step (or
// nsteps) and `receivedFingerprint` as LaneExec's.
struct LaneBeacon {
  uint64_t step;
  uint64_t waitingOn;
  uint64_t beats;
  uint64_t ended;
  uint64_t receivedFingerprint;
};

// A wait that runs to its end (a CUDA block) reads the abort and stop words,
// and beats its beacon, once per this many polls, first after that many: on
// the GPU they sit in mapped host memory, and a read across PCIe on every
// wait would slow every message (a block polls every ~100 ns, so a raised
// word ends it within about a millisecond). A resumable wait (the host
// runner) reads them on its one poll.
#if defined(__CUDA_ARCH__)
constexpr uint64_t kPollsPerAbortCheck = 8192;
#else
constexpr uint64_t kPollsPerAbortCheck = 1024;
#endif

// Polls ready() until it is true, the abort word is set or the bound is hit.
template <class Ready>
BRAID_HD ExecStatus waitUntil(const WaitControl& w, Ready ready) {
  for (uint64_t polls = 0;; ++polls) {
    if (ready()) return ExecStatus::Ok;
    if (w.resumable || polls % kPollsPerAbortCheck == kPollsPerAbortCheck - 1) {
      if ((w.abortFlag != nullptr && loadFlag(w.abortFlag) != 0) || (w.stopFlag != nullptr && loadFlag(w.stopFlag) != 0))
        return ExecStatus::Aborted;
      if (w.beacon != nullptr) storeRelaxed(&w.beacon->beats, polls / kPollsPerAbortCheck + 1);
    }
    if (w.resumable) return ExecStatus::WouldBlock;
    if (w.maxPolls != 0 && polls >= w.maxPolls) return ExecStatus::TimedOut;
    pauseAfter(polls);
  }
}

// One LL line: data in the low half, flag in the high half of one uint64_t.
BRAID_HD BRAID_INLINE uint64_t llLine(uint32_t data, uint32_t flag) {
  return uint64_t(data) | (uint64_t(flag) << 32);
}
BRAID_HD BRAID_INLINE uint32_t llData(uint64_t line) { return uint32_t(line); }
BRAID_HD BRAID_INLINE uint32_t llFlag(uint64_t line) { return uint32_t(line >> 32); }

constexpr uint64_t kLLBytesPerLine = 4;

BRAID_HD BRAID_INLINE uint64_t llLinesFor(uint64_t bytes) {
  return (bytes + kLLBytesPerLine - 1) / kLLBytesPerLine;
}

// Lines of one LL message: the fingerprint header, then the data.
BRAID_HD BRAID_INLINE uint64_t llMessageLines(uint64_t bytes) { return 1 + llLinesFor(bytes); }

// A bulk message's word (FifoView::sizes): its size in the low half, its
// operation's fingerprint in the high half. One store, so the receiver never
// sees one without the other; slots are smaller than 2 GiB (kMaxSlotBytes).
//
// Bit 31 (kMessageByReference) says that the slot holds no bytes but a
// pointer to them, in this process's memory: between a host lane and the
// network bridge of its own process only (net_bridge.h), which sends the
// bytes from a user buffer, or received them straight into one. Such a word
// never crosses a process, and a lane in a CUDA block never sees one.
constexpr uint64_t kMaxSlotBytes = (uint64_t(1) << 31) - 1;
constexpr uint64_t kMessageByReference = uint64_t(1) << 31;
BRAID_HD BRAID_INLINE uint64_t messageWord(uint64_t bytes, uint32_t fingerprint, bool byReference = false) {
  return (bytes & kMaxSlotBytes) | (byReference ? kMessageByReference : 0) | (uint64_t(fingerprint) << 32);
}
BRAID_HD BRAID_INLINE uint64_t messageBytes(uint64_t word) { return word & kMaxSlotBytes; }
BRAID_HD BRAID_INLINE uint32_t messageFingerprint(uint64_t word) { return uint32_t(word >> 32); }
BRAID_HD BRAID_INLINE bool messageByReference(uint64_t word) { return (word & kMessageByReference) != 0; }

// Pointers to one FIFO's memory, identical at both ends.
struct FifoView {
  uint64_t* head = nullptr;   // bulk: messages posted; written by the sender
  uint64_t* tail = nullptr;   // messages consumed; written by the receiver
  uint64_t* sizes = nullptr;  // bulk: the messageWord of each slot [nslots]
  char* slots = nullptr;      // nslots x slotStride bytes, 64-byte aligned
  uint64_t slotStride = 0;
  uint64_t payloadBytes = 0;  // the most bytes one message carries
  uint32_t nslots = 0;
  Protocol protocol = Protocol::Bulk;

  BRAID_HD char* slot(uint64_t message) const { return slots + (message % nslots) * slotStride; }
};

// One end of a FIFO, owned by the single lane that uses it: `seq` counts the
// messages this end has moved (starts at the FIFO's base). `seen` is the
// other end's counter as this end last loaded it (tail for a sender, head
// for a bulk receiver; starts at the base too): while it already shows room
// or a message, the counter's cache line, which the other end writes, is not
// read again.
struct Port {
  FifoView fifo;
  uint64_t seq = 0;
  uint64_t seen = 0;
};

// Byte layout of one FIFO in a single allocation: counters on their own cache
// lines (the two ends never write the same line), sizes, then the slots.
struct FifoLayout {
  uint64_t headOffset = 0;
  uint64_t tailOffset = 64;
  uint64_t sizesOffset = 128;
  uint64_t slotsOffset = 0;
  uint64_t slotStride = 0;
  uint64_t payloadBytes = 0;
  uint64_t totalBytes = 0;
  uint32_t nslots = 0;
  Protocol protocol = Protocol::Bulk;
};

BRAID_HD inline uint64_t roundUp64(uint64_t n) { return (n + 63) / 64 * 64; }

// payloadBytes: the most bytes a message carries (a plan's chunk); LL slots
// need twice that (a 4-byte flag per 4 data bytes) and a header line.
BRAID_HD inline FifoLayout fifoLayout(Protocol protocol, uint32_t nslots, uint64_t payloadBytes) {
  FifoLayout l;
  l.nslots = nslots;
  l.protocol = protocol;
  l.payloadBytes = payloadBytes;
  l.slotStride = roundUp64(protocol == Protocol::LL ? llMessageLines(payloadBytes) * 8 : payloadBytes);
  if (l.slotStride == 0) l.slotStride = 64;
  l.slotsOffset = roundUp64(l.sizesOffset + 8ull * nslots);
  l.totalBytes = l.slotsOffset + l.slotStride * nslots;
  return l;
}

BRAID_HD inline FifoView fifoViewAt(char* base, const FifoLayout& l) {
  FifoView v;
  v.head = reinterpret_cast<uint64_t*>(base + l.headOffset);
  v.tail = reinterpret_cast<uint64_t*>(base + l.tailOffset);
  v.sizes = reinterpret_cast<uint64_t*>(base + l.sizesOffset);
  v.slots = base + l.slotsOffset;
  v.slotStride = l.slotStride;
  v.payloadBytes = l.payloadBytes;
  v.nslots = l.nslots;
  v.protocol = l.protocol;
  return v;
}

// Writes a FIFO's initial state into `image` (totalBytes, 8-byte aligned,
// host memory: the FIFO itself, or a copy to upload to the device): counters
// at `base`, every LL flag at uint32(base). That flag is next expected only by
// message base + 2^32, long after every slot was overwritten, so no stale line
// is ever taken for a new one (zeroed memory is right for base 0).
inline void initFifoImage(char* image, const FifoLayout& l, uint64_t base) {
  for (uint64_t i = 0; i < l.totalBytes; ++i) image[i] = 0;
  const FifoView v = fifoViewAt(image, l);
  *v.head = base;
  *v.tail = base;
  if (l.protocol != Protocol::LL) return;
  const uint64_t lines = l.slotStride / 8;
  for (uint32_t s = 0; s < l.nslots; ++s) {
    uint64_t* line = reinterpret_cast<uint64_t*>(v.slots + s * l.slotStride);
    for (uint64_t i = 0; i < lines; ++i) line[i] = llLine(0, uint32_t(base));
  }
}

// Sender: waits until message port.seq+1 has a free slot. Thread 0 keeps
// the tail it saw (every thread reads `seen` before the barriers that come
// before its next write).
template <class G>
BRAID_HD ExecStatus waitCredit(Port& port, const G& g, const WaitControl& w) {
  const uint64_t m = port.seq + 1;
  const FifoView& f = port.fifo;
  if (m - port.seen <= uint64_t(f.nslots)) return ExecStatus::Ok;
  uint64_t tail = 0;
  const ExecStatus st = ExecStatus(g.agree(int32_t(waitUntil(w, [&] {
    tail = loadAcquire(f.tail);
    return m - tail <= uint64_t(f.nslots);
  }))));
  if (st == ExecStatus::Ok && g.tid() == 0) port.seen = tail;
  return st;
}

}  // namespace braid::executor
