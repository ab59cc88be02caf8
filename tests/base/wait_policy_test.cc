// src/base/wait_policy: a waiter spins for spinPolls polls, then yields; where
// its polls read sockets, the spin also ends once it has lasted what that many
// polls of memory take.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

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

}  // namespace
}  // namespace braid
