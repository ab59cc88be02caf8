// src/engine/lanes/zero_copy: which bridged messages skip the lanes' copies.
// The steps are those of a two-rank ring allreduce on one rank (send its
// chunk, receive-reduce-copy-send the other, receive its own back), over
// real buffers, out of place and in place, plus cases that must keep a copy;
// steps of one lane are in its order, those of two lanes in none.
#include "engine/lanes/zero_copy.h"

#include <gtest/gtest.h>

#include <vector>

namespace braid {
namespace lanes {
namespace {

using schedule::StepKind;

constexpr uint64_t kChunk = 1 << 20;

ZeroCopyStep step(StepKind kind, const char* reads, const char* writes, uint64_t bytes = kChunk, uint32_t lane = 0) {
  ZeroCopyStep s;
  s.lane = lane;
  s.kind = kind;
  s.reads = reads;
  s.writes = writes;
  s.bytes = bytes;
  s.plain = true;
  s.sendBridged = kind == StepKind::Send || kind == StepKind::RecvReduceCopySend || kind == StepKind::RecvCopySend;
  s.recvBridged = braid::executor::stepReceivesKind(kind);
  return s;
}

// Rank 0's ring: send input chunk 0, reduce chunk 1 into the output and send
// it, receive the finished chunk 0 into the output.
std::vector<ZeroCopyStep> ring(const char* in, const char* out) {
  return {step(StepKind::Send, in, nullptr), step(StepKind::RecvReduceCopySend, in + kChunk, out + kChunk),
          step(StepKind::Recv, nullptr, out)};
}

TEST(ZeroCopy, OutOfPlaceRingSkipsEveryCopy) {
  std::vector<char> in(2 * kChunk), out(2 * kChunk);
  const auto d = decideZeroCopy(ring(in.data(), out.data()));
  ASSERT_EQ(d.size(), 3u);
  EXPECT_TRUE(d[0].byReference) << "the send of the input";
  EXPECT_TRUE(d[1].byReference) << "the reduced chunk";
  EXPECT_TRUE(d[2].placed) << "the finished chunk received";
  EXPECT_FALSE(d[0].placed || d[1].placed || d[2].byReference);
}

// In place, the finished chunk 0 lands where chunk 0 was sent from by
// reference, later in the same lane: its message is held until that
// reference has left (after), and then it may be placed there.
TEST(ZeroCopy, InPlaceRingHoldsTheResultUntilTheSentChunkLeft) {
  std::vector<char> buf(2 * kChunk);
  const auto d = decideZeroCopy(ring(buf.data(), buf.data()));
  EXPECT_TRUE(d[0].byReference);
  EXPECT_TRUE(d[1].byReference);
  EXPECT_TRUE(d[2].placed);
  EXPECT_EQ(d[2].after, 0);
  EXPECT_EQ(d[0].after, -1);
  EXPECT_EQ(d[1].after, -1) << "a step's own write comes before its reference";
}

// The same two steps in two lanes have no order: the send copies.
TEST(ZeroCopy, AnotherLanesWriteOfAReferencedRangeIsACopy) {
  std::vector<char> buf(kChunk);
  const auto d = decideZeroCopy({step(StepKind::Send, buf.data(), nullptr),
                                 step(StepKind::Recv, nullptr, buf.data(), kChunk, 1)});
  EXPECT_FALSE(d[0].byReference);
  EXPECT_FALSE(d[1].placed) << "the bridge could write what the other lane still copies from";
  EXPECT_EQ(d[1].after, -1);
}

// A later write that no received message precedes (a local copy) cannot be
// held back: the send copies. So does one a receive on an unbridged FIFO makes.
TEST(ZeroCopy, ALaterWriteTheBridgeCannotHoldMakesTheSendACopy) {
  std::vector<char> buf(kChunk), other(kChunk);
  auto held = step(StepKind::Recv, nullptr, buf.data());
  held.recvBridged = false;
  for (const ZeroCopyStep& later : {step(StepKind::Copy, other.data(), buf.data()), held}) {
    const auto d = decideZeroCopy({step(StepKind::Send, buf.data(), nullptr), later});
    EXPECT_FALSE(d[0].byReference);
    EXPECT_EQ(d[1].after, -1);
  }
}

// A receive overwriting two references would wait for both: both copy.
TEST(ZeroCopy, AReceiveHeldByTwoReferencesHoldsByNone) {
  std::vector<char> buf(2 * kChunk);
  const auto d = decideZeroCopy({step(StepKind::Send, buf.data(), nullptr),
                                 step(StepKind::Send, buf.data() + kChunk, nullptr),
                                 step(StepKind::Recv, nullptr, buf.data() + kChunk / 2)});
  EXPECT_FALSE(d[0].byReference);
  EXPECT_FALSE(d[1].byReference);
  EXPECT_EQ(d[2].after, -1);
  EXPECT_FALSE(d[2].placed) << "it would overwrite what earlier steps copy from when they run";
}

TEST(ZeroCopy, AReferencedRangeAnotherStepWritesIsCopied) {
  std::vector<char> in(2 * kChunk), out(2 * kChunk);
  auto steps = ring(in.data(), out.data());
  // A later local copy that writes part of what step 0 sends from.
  steps.push_back(step(StepKind::Copy, out.data() + kChunk, in.data() + kChunk / 2, kChunk / 4));
  steps.back().sendBridged = steps.back().recvBridged = false;
  const auto d = decideZeroCopy(steps);
  EXPECT_FALSE(d[0].byReference);
  EXPECT_TRUE(d[2].placed);
}

// The bridge may write a placed range before earlier steps of its lane ran,
// and whenever another lane's do: reading it there makes it a copy. Reading
// it later in its lane, after its message arrived, does not.
TEST(ZeroCopy, APlacedRangeReadBeforeItsStepIsCopied) {
  std::vector<char> in(2 * kChunk), out(2 * kChunk);
  for (uint32_t lane : {0u, 1u}) {
    auto steps = ring(in.data(), out.data());
    // A small send of the output's first chunk: before the ring's steps in
    // lane 0, anywhere in lane 1.
    steps.insert(steps.begin(), step(StepKind::Send, out.data() + kChunk - 64, nullptr, 128, lane));
    const auto d = decideZeroCopy(steps);
    EXPECT_FALSE(d[3].placed) << "lane " << lane;
    EXPECT_TRUE(d[1].byReference) << "reads do not stop a reference";
    EXPECT_TRUE(d[2].byReference) << "a read of the reduced chunk does not stop its reference";
  }
  auto steps = ring(in.data(), out.data());
  steps.push_back(step(StepKind::Send, out.data() + kChunk - 64, nullptr, 128));
  EXPECT_TRUE(decideZeroCopy(steps)[2].placed) << "a later read of its lane";
}

TEST(ZeroCopy, RangesThatOnlyTouchDoNotOverlap) {
  std::vector<char> buf(3 * kChunk);
  std::vector<ZeroCopyStep> steps = {step(StepKind::Recv, nullptr, buf.data() + kChunk),
                                     step(StepKind::Recv, nullptr, buf.data()),
                                     step(StepKind::Recv, nullptr, buf.data() + 2 * kChunk)};
  for (const ZeroCopyDecision& d : decideZeroCopy(steps)) EXPECT_TRUE(d.placed);
  steps.push_back(step(StepKind::Recv, nullptr, buf.data() + kChunk + 1, 1, 1));
  const auto d = decideZeroCopy(steps);
  EXPECT_TRUE(d[1].placed && d[2].placed);
  EXPECT_FALSE(d[0].placed || d[3].placed) << "two lanes receive into overlapping bytes";
}

TEST(ZeroCopy, SmallNarrowedOrUnbridgedMessagesAreCopied) {
  std::vector<char> in(2 * kChunk), out(2 * kChunk);
  auto small = ring(in.data(), out.data());
  for (ZeroCopyStep& s : small) s.bytes = kZeroCopyMinBytes - 1;
  auto narrowed = ring(in.data(), out.data());
  for (ZeroCopyStep& s : narrowed) s.plain = false;
  auto local = ring(in.data(), out.data());
  for (ZeroCopyStep& s : local) s.sendBridged = s.recvBridged = false;
  for (const auto* steps : {&small, &narrowed, &local})
    for (const ZeroCopyDecision& d : decideZeroCopy(*steps)) EXPECT_FALSE(d.byReference || d.placed);
}

TEST(ZeroCopy, RecvCopySendIsPlacedAndSentFromItsDestination) {
  std::vector<char> out(kChunk);
  const auto d = decideZeroCopy({step(StepKind::RecvCopySend, nullptr, out.data())});
  EXPECT_TRUE(d[0].placed);
  EXPECT_TRUE(d[0].byReference);
}

}  // namespace
}  // namespace lanes
}  // namespace braid
