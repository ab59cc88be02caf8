// Whether a rank is on a CPU now, as far as a peer on its host can tell. A
// rank that waits polls for a while before it yields; the polls answer within
// nanoseconds a peer that runs on another CPU, but a peer that is not running
// (it yields, or waits for the very CPU the poller holds) cannot answer until
// the poller lets go. Each rank keeps one slot in shared memory
// (engine/presence_board.h) saying the CPU it last ran on and whether it is
// yielding; a waiter polls only while a peer it waits for may be running.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

namespace braid {

// One rank's presence: written by that rank only, read by its peers. On a
// cache line of its own, so that its writes disturb no other rank's slot.
struct alignas(64) PresenceSlot {
  // Bits 0-31: the CPU the rank last ran on, plus 1 (0: not known yet).
  // Bit 32: it is yielding or sleeping (off its CPU, or about to be).
  std::atomic<uint64_t> word{0};
};
static_assert(sizeof(PresenceSlot) == 64, "a presence slot is one cache line");

constexpr uint64_t kPresenceYielding = uint64_t(1) << 32;

inline uint64_t presenceWord(int cpu, bool yielding) {
  return uint64_t(uint32_t(cpu + 1)) | (yielding ? kPresenceYielding : 0);
}

// The rank runs on `cpu`; written only when that changes, so that the peers
// polling the slot keep their copy of its line.
inline void markRunning(PresenceSlot& s, int cpu) {
  const uint64_t w = presenceWord(cpu, false);
  if (s.word.load(std::memory_order_relaxed) != w) s.word.store(w, std::memory_order_relaxed);
}

// The rank is about to give up its CPU (sched_yield, nanosleep).
inline void markYielding(PresenceSlot& s) {
  s.word.store(s.word.load(std::memory_order_relaxed) | kPresenceYielding, std::memory_order_relaxed);
}

// Whether the peer of `s` may be running while the caller runs on `myCpu`: not
// when it yields, nor when it last ran on `myCpu` (the caller holds that CPU).
// A slot that says nothing yet answers yes, as does a CPU number sched_getcpu
// could not give (-1): a wrong yes costs a spin, a wrong no a switch.
inline bool mayRunElsewhere(const PresenceSlot& s, int myCpu) {
  const uint64_t w = s.word.load(std::memory_order_relaxed);
  if (w == 0) return true;
  if ((w & kPresenceYielding) != 0) return false;
  return myCpu < 0 || uint32_t(w) != uint32_t(myCpu + 1);
}

// The CPU the calling thread runs on now, or -1 (a read of the kernel's rseq
// area: a few nanoseconds).
inline int currentCpu() { return sched_getcpu(); }

}  // namespace braid
