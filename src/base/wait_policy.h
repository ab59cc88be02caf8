// How a thread that waits on another rank gives up its core: poll (spin),
// then yield, then sleep. A poll answers a peer within nanoseconds but steals
// the core from a peer that shares it; a sleep frees the core but answers
// late. The engine's runner and every other polling wait share this policy.
#pragma once

#include <sched.h>
#include <time.h>

#include <chrono>
#include <cstdint>

#include "base/clock.h"
#include "base/presence.h"

namespace braid {

struct WaitPolicy {
  int spinPolls = 64;          // polls before the first yield (BRAID_SPIN_POLLS)
  // The same for a waiter that heeds its peers' presence (base/presence.h): it
  // stops polling as soon as every peer it waits for is off a CPU, so it can
  // poll as long as where every rank has a core of its own. 0: presence is not
  // heeded (every rank has a core: a peer is off a CPU only after long waits).
  int presenceSpinPolls = 0;
  int64_t yieldMicros = 5000;  // then yield this long (BRAID_YIELD_US)
  int64_t sleepNanos = 50000;  // then sleep this long per poll (BRAID_SLEEP_NS)
};

// One waiter's progress through the policy; reset() whenever something moved.
// Yielding hands the core straight to the peer waited for when ranks are
// oversubscribed (8 on 2 cores); sleeping after yieldMicros stops a rank stuck
// on a slow peer from burning a core. Where a poll reads sockets (slowPolls),
// the spin is also capped in time, at what spinPolls polls of memory take (5
// ns each): such a poll costs microseconds, and 2048 of them would hold the
// core for milliseconds from a peer that shares it. Polls of memory alone are
// counted only, as the host executor's were, and read no clock while they
// spin (shared memory, 8 B-64 KiB: 2-8% faster than capped with 2 and 8
// ranks on 2 cores; performance.md, 2026-12-02).
// With `self` (the waiter's presence slot, base/presence.h) it marks itself
// yielding around each yield and sleep, and the CPU it comes back on, so that
// its peers stop polling for it while it is off its CPU.
class Backoff {
 public:
  explicit Backoff(const WaitPolicy& p, bool slowPolls = false, PresenceSlot* self = nullptr)
      : self_(self),
        spin_(static_cast<unsigned>(p.spinPolls)),
        capped_(slowPolls),
        spinFor_(std::chrono::nanoseconds(5 * int64_t(p.spinPolls))),
        yieldFor_(std::chrono::microseconds(p.yieldMicros)),
        sleepNs_(static_cast<long>(p.sleepNanos)) {}
  void reset() {
    idle_ = 0;
    sleeping_ = false;
  }
  // Whether the waiter still spins: it has not yielded since the last reset.
  bool spinning() const { return idle_ < spin_; }
  // Polls so far since the last reset.
  unsigned polls() const { return idle_; }
  // Ends the spin: the next pause yields. For a waiter whose peers are all off
  // a CPU (base/presence.h), whom its polls would only keep waiting.
  void stopSpinning() {
    if (idle_ + 1 < spin_) idle_ = spin_ - 1;
  }
  void pause() {
    if (++idle_ < spin_) {
      // The clock is read once per 16 polls, from the 16th on: it costs more
      // than a poll (38 ns on this project's guest), and a small call's
      // message mostly arrives within a few polls, which then read no clock.
      if (!capped_ || (idle_ & 15) != 0) return;
      const Clock::time_point now = Clock::now();
      if (idle_ == 16) idleSince_ = now;
      if (now - idleSince_ < spinFor_) return;
      idle_ = spin_;
    }
    if (idle_ == spin_) yieldingSince_ = Clock::now();
    // Once per 64 yields: a yield that finds no one else to run is cheap.
    if (!sleeping_ && (idle_ & 63) == 0 && Clock::now() - yieldingSince_ >= yieldFor_) sleeping_ = true;
    if (self_ != nullptr) markYielding(*self_);
    if (!sleeping_) {
      sched_yield();
    } else {
      timespec ts{0, sleepNs_};
      nanosleep(&ts, nullptr);
    }
    if (self_ != nullptr) markRunning(*self_, currentCpu());
  }

 private:
  PresenceSlot* self_;
  unsigned spin_;
  bool capped_;
  unsigned idle_ = 0;
  bool sleeping_ = false;
  Clock::time_point idleSince_, yieldingSince_;
  Clock::duration spinFor_;
  Clock::duration yieldFor_;
  long sleepNs_;
};

}  // namespace braid
