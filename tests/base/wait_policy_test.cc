// src/base/wait_policy: a waiter spins for spinPolls polls, then yields; where
// its polls read sockets, the spin also ends once it has lasted what that many
// polls of memory take; a waiter told that its peers are off a CPU yields at
// once. src/base/presence: the slot that tells a rank's peers whether it may
// be running, which a waiter's Backoff keeps.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "base/presence.h"
#include "base/wait_policy.h"

namespace braid {
namespace {

WaitPolicy spinning(int polls) {
  WaitPolicy p;
  p.spinPolls = polls;
  return p;
}

// Polls that each take microseconds, as a round that reads sockets does.
void slowPoll() { std::this_thread::sleep_for(std::chrono::microseconds(2)); }

TEST(Backoff, PollsOfMemorySpinTheirWholeCountHoweverLongTheyTake) {
  Backoff b(spinning(64));
  for (int i = 1; i < 64; ++i) {
    slowPoll();
    b.pause();
    ASSERT_TRUE(b.spinning()) << "yielded after " << i << " of 64 polls";
  }
  b.pause();
  EXPECT_FALSE(b.spinning());
}

TEST(Backoff, SlowPollsEndTheSpinOnceItLastedWhatItsCountOfMemoryPollsWould) {
  // 2048 polls of memory take about 10 us; 2048 slow polls would take 4 ms.
  Backoff b(spinning(2048), /*slowPolls=*/true);
  int polls = 0;
  while (b.spinning() && polls < 2048) {
    slowPoll();
    b.pause();
    ++polls;
  }
  EXPECT_LT(polls, 128) << "the spin of slow polls is capped in time";
}

TEST(Backoff, ProgressStartsTheSpinAgain) {
  Backoff b(spinning(4));
  for (int i = 0; i < 4; ++i) b.pause();
  ASSERT_FALSE(b.spinning());
  b.reset();
  EXPECT_TRUE(b.spinning());
  for (int i = 0; i < 3; ++i) b.pause();
  EXPECT_TRUE(b.spinning());
}

TEST(Backoff, StopSpinningYieldsAtTheNextPause) {
  Backoff b(spinning(64));
  for (int i = 0; i < 3; ++i) b.pause();
  EXPECT_EQ(b.polls(), 3u);
  b.stopSpinning();
  ASSERT_TRUE(b.spinning()) << "the pause that follows yields, not stopSpinning itself";
  b.pause();
  EXPECT_FALSE(b.spinning());
  b.reset();
  EXPECT_TRUE(b.spinning());
  EXPECT_EQ(b.polls(), 0u);
}

TEST(Presence, ASlotSaysWhetherItsRankMayRunOnAnotherCpu) {
  PresenceSlot s;
  EXPECT_TRUE(mayRunElsewhere(s, 0)) << "a slot that says nothing yet";
  markRunning(s, 3);
  EXPECT_TRUE(mayRunElsewhere(s, 1));
  EXPECT_FALSE(mayRunElsewhere(s, 3)) << "it waits for the CPU the caller holds";
  EXPECT_TRUE(mayRunElsewhere(s, -1)) << "the caller does not know its CPU";
  markYielding(s);
  EXPECT_FALSE(mayRunElsewhere(s, 1));
  EXPECT_FALSE(mayRunElsewhere(s, 3));
  markRunning(s, 0);
  EXPECT_TRUE(mayRunElsewhere(s, 1));
  EXPECT_FALSE(mayRunElsewhere(s, 0)) << "CPU 0 is a CPU, not 'unknown'";
}

// A waiter whose every poll yields: its slot says yielding around the yields
// (its peers see it), and running on its CPU once it stops.
TEST(Presence, AWaitersBackoffMarksItsSlotYieldingWhileItYields) {
  PresenceSlot slot;
  std::atomic<bool> stop{false};
  std::thread waiter([&] {
    Backoff b(spinning(1), false, &slot);
    while (!stop.load()) b.pause();
  });
  bool sawYielding = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!sawYielding && std::chrono::steady_clock::now() < until)
    sawYielding = (slot.word.load() & kPresenceYielding) != 0;
  stop = true;
  waiter.join();
  EXPECT_TRUE(sawYielding) << "the slot never said yielding";
  const uint64_t last = slot.word.load();
  EXPECT_EQ(last & kPresenceYielding, 0u) << "the waiter came back from its last yield";
  EXPECT_NE(last, 0u) << "it marked the CPU it came back on";
  EXPECT_TRUE(mayRunElsewhere(slot, -1));
}

}  // namespace
}  // namespace braid
