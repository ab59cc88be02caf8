// The FIFO protocols of the plan interpreter (kernels/executor): LL flags
// wrapping and slots reused across many messages, partial lines never
// consumed, abort and the wait bound ending waits, one and two slots, bulk
// size checks; and a cross-check of the harness's reference against the real
// engine through the public API.
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstring>
#include <thread>
#include <vector>

#include "kernels/executor/bulk_protocol.h"
#include "kernels/executor/ll_protocol.h"
#include "kernels/executor/plan_interpreter.h"
#include "reduce/host_reduce.h"
#include "tests/kernels/exec_harness.h"

namespace exectest {
namespace {

using braid::schedule::Algorithm;
using braid::schedule::Collective;
using namespace braid::executor;

// A FIFO in heap memory with its two ports.
struct TestFifo {
  braid::executor::FifoLayout layout;
  std::vector<uint64_t> words;
  braid::executor::Port send, recv;
  TestFifo(braid::executor::Protocol proto, uint32_t nslots, uint64_t payload, uint64_t base) {
    layout = fifoLayout(proto, nslots, payload);
    words.resize(layout.totalBytes / 8);
    initFifoImage(reinterpret_cast<char*>(words.data()), layout, base);
    send.fifo = recv.fifo = fifoViewAt(reinterpret_cast<char*>(words.data()), layout);
    send.seq = recv.seq = send.seen = recv.seen = base;
  }
  uint64_t* line(uint64_t message, uint64_t i) {
    return reinterpret_cast<uint64_t*>(send.fifo.slot(message)) + i;
  }
};

// Many steps through few slots with counters that start just below 2^32 (LL
// flags wrap through 0) and just below 2^64 (the counters themselves wrap).
TEST(Protocol, SequenceWrapAndSlotReuse) {
  const uint64_t bases[] = {(uint64_t(1) << 32) - 3, ~uint64_t(0) - 6};
  for (uint64_t base : bases) {
    for (braid::executor::Protocol proto : {braid::executor::Protocol::LL, braid::executor::Protocol::Bulk}) {
      for (uint32_t nslots : {1u, 2u}) {
        CollCase c;
        c.nranks = 3;
        c.count = 997;
        c.chunkElems = 7;  // ~100 messages per FIFO through 1 or 2 slots
        c.type = ncclFloat32;
        if (proto == braid::executor::Protocol::Bulk && nslots == 1) {  // bulk needs 2 slots for a ring
          c.coll = Collective::AllToAll;
          c.algorithm = Algorithm::Direct;
        }
        RunConfig cfg;
        cfg.protocol = proto;
        cfg.nslots = nslots;
        cfg.fifoBase = base;
        EXPECT_EQ(runAndCompare(c, cfg, base & 0xffff), "") << "base " << base;
      }
    }
  }
}

// LL works with one slot per connection for every schedule: the receiver
// unpacks and hands the slot back before its step waits to send.
TEST(Protocol, LLOneSlotEverySchedule) {
  const std::pair<Collective, Algorithm> schedules[] = {
      {Collective::AllReduce, Algorithm::Ring},          {Collective::AllReduce, Algorithm::Tree},
      {Collective::AllReduce, Algorithm::RecursiveDoubling}, {Collective::AllReduce, Algorithm::HalvingDoubling},
      {Collective::ReduceScatter, Algorithm::Ring},       {Collective::AllGather, Algorithm::RecursiveDoubling},
      {Collective::Broadcast, Algorithm::Tree},           {Collective::Reduce, Algorithm::Ring},
      {Collective::AllToAll, Algorithm::Direct},          {Collective::Send, Algorithm::Direct}};
  for (const auto& s : schedules) {
    CollCase c;
    c.coll = s.first;
    c.algorithm = s.second;
    c.nranks = 5;
    c.count = 101;
    c.chunkElems = 9;
    c.type = ncclBfloat16;
    RunConfig cfg;
    cfg.protocol = braid::executor::Protocol::LL;
    cfg.nslots = 1;
    EXPECT_EQ(runAndCompare(c, cfg, 3), "");
  }
}

// Bulk reads the received slot in place, so a step that receives and sends
// holds its slot while it waits to send: with one slot a ring deadlocks (as
// a bulk ring needs two). The wait bound turns that into
// an error on every lane instead of a hang.
TEST(Protocol, BulkOneSlotRingEndsByWaitBound) {
  CollCase c;
  c.nranks = 2;
  c.count = 40;
  c.chunkElems = 10;
  RunConfig cfg;
  cfg.protocol = braid::executor::Protocol::Bulk;
  cfg.nslots = 1;
  cfg.maxPolls = 2000;
  const auto plans = makePlans(c);
  auto data = makeData(c, plans, 1);
  std::vector<braid::executor::ExecStatus> statuses;
  const std::string err = runInterpreter(c, cfg, plans, &data, &statuses);
  EXPECT_NE(err.find("timed out"), std::string::npos) << err;
  for (braid::executor::ExecStatus s : statuses) EXPECT_EQ(s, braid::executor::ExecStatus::TimedOut);
}

// A line is consumed only when its flag is the message's: lines holding the
// new data with the previous flag, or the old data, are not taken. The
// receiver gives up (bounded wait) without consuming anything, then succeeds
// once every line carries its flag.
TEST(Protocol, LLLineConsumedOnlyWithItsFlag) {
  const uint64_t base = 41;
  TestFifo f(braid::executor::Protocol::LL, 2, 64, base);
  const uint64_t m = base + 1;
  const uint32_t flag = uint32_t(m);
  const uint64_t lines = braid::executor::llLinesFor(24);
  const uint32_t fp = 0x5eed;
  *f.line(m, 0) = braid::executor::llLine(fp, flag);  // the header
  for (uint64_t i = 1; i <= lines; ++i) {
    // Every other line: new data but a stale flag (what a receiver would
    // see if data and flag were stored separately and the flag lagged).
    *f.line(m, i) = braid::executor::llLine(1000 + uint32_t(i), i % 2 == 0 ? flag : uint32_t(base));
  }
  std::vector<uint32_t> stage(lines, 0);
  braid::executor::WaitControl w;
  w.maxPolls = 500;
  braid::executor::HostGroup g;
  EXPECT_EQ(llRecv(f.recv, 24, fp, stage.data(), g, w), braid::executor::ExecStatus::TimedOut);
  EXPECT_EQ(f.recv.seq, base);        // nothing consumed
  EXPECT_EQ(*f.recv.fifo.tail, base);  // slot not released
  for (uint64_t i = 1; i <= lines; ++i) *f.line(m, i) = braid::executor::llLine(2000 + uint32_t(i), flag);
  ASSERT_EQ(llRecv(f.recv, 24, fp, stage.data(), g, w), braid::executor::ExecStatus::Ok);
  for (uint64_t i = 0; i < lines; ++i) EXPECT_EQ(stage[i], 2001 + i);
  EXPECT_EQ(f.recv.seq, m);
  EXPECT_EQ(*f.recv.fifo.tail, m);
}

// A sender and a receiver thread over two slots, 3000 messages whose every
// line says which message and line it is: the receiver never sees a line of
// another message (a torn or stale line), across many reuses of each slot and
// a flag wrap.
TEST(Protocol, LLStressNoStaleLines) {
  const uint64_t base = (uint64_t(1) << 32) - 1000;
  const uint64_t payload = 4 * 37;
  TestFifo f(braid::executor::Protocol::LL, 2, payload, base);
  const int kMessages = 3000;
  braid::executor::WaitControl w;
  w.maxPolls = uint64_t(1) << 22;
  std::thread sender([&] {
    braid::executor::HostGroup g;
    std::vector<uint32_t> stage(37);
    for (int k = 0; k < kMessages; ++k) {
      for (uint32_t i = 0; i < 37; ++i) stage[i] = uint32_t(k) * 64 + i;
      if (waitCredit(f.send, g, w) != braid::executor::ExecStatus::Ok) return;
      llSend(f.send, payload, uint32_t(k), stage.data(), g);
    }
  });
  braid::executor::HostGroup g;
  std::vector<uint32_t> stage(37);
  int bad = 0;
  for (int k = 0; k < kMessages; ++k) {
    ASSERT_EQ(llRecv(f.recv, payload, uint32_t(k), stage.data(), g, w), braid::executor::ExecStatus::Ok) << "message " << k;
    for (uint32_t i = 0; i < 37; ++i) bad += stage[i] != uint32_t(k) * 64 + i;
  }
  sender.join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(f.recv.seq, base + kMessages);
}

// The abort word releases a receiver waiting for a message that never comes
// and a sender waiting for a slot that is never freed, both protocols,
// without any wait bound.
TEST(Protocol, AbortReleasesWaiters) {
  for (braid::executor::Protocol proto : {braid::executor::Protocol::Bulk, braid::executor::Protocol::LL}) {
    TestFifo f(proto, 1, 64, 0);
    uint32_t abortWord = 0;
    braid::executor::WaitControl w;
    w.abortFlag = &abortWord;
    // Fill the only slot so that a second send must wait.
    braid::executor::HostGroup g0;
    std::vector<uint32_t> stage(16, 7);
    ASSERT_EQ(waitCredit(f.send, g0, w), braid::executor::ExecStatus::Ok);
    if (proto == braid::executor::Protocol::LL) {
      llSend(f.send, 64, 0, stage.data(), g0);
    } else {
      bulkPost(f.send, 64, 0, g0);
    }
    TestFifo empty(proto, 2, 64, 0);
    braid::executor::ExecStatus recvStatus = braid::executor::ExecStatus::Ok, sendStatus = braid::executor::ExecStatus::Ok;
    std::thread receiver([&] {
      braid::executor::HostGroup g;
      std::vector<uint32_t> st(16);
      const char* data = nullptr;
      recvStatus = proto == braid::executor::Protocol::LL ? llRecv(empty.recv, 64, 0, st.data(), g, w)
                                         : bulkWaitRecv(empty.recv, 64, 0, &data, g, w);
    });
    std::thread sender([&] {
      braid::executor::HostGroup g;
      sendStatus = waitCredit(f.send, g, w);
    });
    __atomic_store_n(&abortWord, 1u, __ATOMIC_RELEASE);
    receiver.join();
    sender.join();
    EXPECT_EQ(recvStatus, braid::executor::ExecStatus::Aborted);
    EXPECT_EQ(sendStatus, braid::executor::ExecStatus::Aborted);
  }
}

// A whole collective stopped by the abort word: every lane returns (aborted
// or, if it finished first, ok), none hangs. One rank's lanes get no peer
// (P=2 allreduce where rank 1 never runs) so rank 0 must wait.
TEST(Protocol, AbortStopsLanesOfACollective) {
  CollCase c;
  c.nranks = 2;
  c.count = 100;
  c.chunkElems = 10;
  auto plans = makePlans(c);
  plans[1].lanes.clear();  // rank 1 never takes part
  auto data = makeData(c, plans, 9);
  uint32_t abortWord = 0;
  RunConfig cfg;
  cfg.maxPolls = 0;
  cfg.abortFlag = &abortWord;
  std::string err;
  std::vector<braid::executor::ExecStatus> statuses;
  std::thread run([&] { err = runInterpreter(c, cfg, plans, &data, &statuses); });
  __atomic_store_n(&abortWord, 1u, __ATOMIC_RELEASE);
  run.join();
  ASSERT_EQ(statuses.size(), plans[0].lanes.size());
  for (braid::executor::ExecStatus s : statuses) EXPECT_EQ(s, braid::executor::ExecStatus::Aborted);
}

// Bulk carries each message's size; a receiver expecting another size fails.
TEST(Protocol, BulkSizeMismatch) {
  TestFifo f(braid::executor::Protocol::Bulk, 2, 64, 0);
  braid::executor::HostGroup g;
  braid::executor::WaitControl w;
  ASSERT_EQ(waitCredit(f.send, g, w), braid::executor::ExecStatus::Ok);
  bulkPost(f.send, 40, 7, g);
  const char* data = nullptr;
  EXPECT_EQ(bulkWaitRecv(f.recv, 48, 7, &data, g, w), braid::executor::ExecStatus::SizeMismatch);
  EXPECT_EQ(bulkWaitRecv(f.recv, 40, 7, &data, g, w), braid::executor::ExecStatus::Ok);
}

// Bulk carries each message's fingerprint: a receiver of another operation
// fails and learns the one the message carried, before any size check.
TEST(Protocol, BulkFingerprintMismatch) {
  TestFifo f(braid::executor::Protocol::Bulk, 2, 64, 0);
  braid::executor::HostGroup g;
  braid::executor::WaitControl w;
  ASSERT_EQ(waitCredit(f.send, g, w), braid::executor::ExecStatus::Ok);
  bulkPost(f.send, 40, 0xabcdef01u, g);
  const char* data = nullptr;
  uint64_t word = 0;
  EXPECT_EQ(bulkWaitRecv(f.recv, 48, 0xabcdef02u, &data, g, w, &word), braid::executor::ExecStatus::FingerprintMismatch);
  EXPECT_EQ(braid::executor::messageFingerprint(word), 0xabcdef01u);
  EXPECT_EQ(braid::executor::messageBytes(word), 40u);
  EXPECT_EQ(f.recv.seq, 0u);  // nothing consumed
  EXPECT_EQ(bulkWaitRecv(f.recv, 40, 0xabcdef01u, &data, g, w), braid::executor::ExecStatus::Ok);
}

// LL carries the fingerprint in a header line read before any data line:
// a receiver of another operation fails at once, even when the message is
// shorter than the one it expects (no wait for lines that never come).
TEST(Protocol, LLFingerprintMismatchBeforeData) {
  TestFifo f(braid::executor::Protocol::LL, 2, 64, 0);
  braid::executor::HostGroup g;
  braid::executor::WaitControl w;
  w.maxPolls = 1000;
  std::vector<uint32_t> stage(16, 3);
  ASSERT_EQ(waitCredit(f.send, g, w), braid::executor::ExecStatus::Ok);
  llSend(f.send, 4, 0x1111u, stage.data(), g);  // one data line
  uint32_t got = 0;
  EXPECT_EQ(llRecv(f.recv, 64, 0x2222u, stage.data(), g, w, nullptr, &got), braid::executor::ExecStatus::FingerprintMismatch);
  EXPECT_EQ(got, 0x1111u);
  EXPECT_EQ(f.recv.seq, 0u);
  EXPECT_EQ(llRecv(f.recv, 4, 0x1111u, stage.data(), g, w), braid::executor::ExecStatus::Ok);
}

// The LL line: data and flag in one 8-byte word.
TEST(Protocol, LLLinePacking) {
  const uint64_t v = braid::executor::llLine(0xdeadbeefu, 0x01234567u);
  EXPECT_EQ(braid::executor::llData(v), 0xdeadbeefu);
  EXPECT_EQ(braid::executor::llFlag(v), 0x01234567u);
  EXPECT_EQ(braid::executor::llLinesFor(0), 0u);
  EXPECT_EQ(braid::executor::llLinesFor(5), 2u);
  EXPECT_EQ(braid::executor::llMessageLines(5), 3u);  // the header and two data lines
  EXPECT_EQ(fifoLayout(braid::executor::Protocol::LL, 2, 20).slotStride, 64u);  // 6 lines, padded to a cache line
  EXPECT_EQ(fifoLayout(braid::executor::Protocol::LL, 2, 32).slotStride, 128u);  // 9 lines
}

// The reference's arithmetic: check it against the real engine
// (ncclCommInitAll, host buffers) where the result cannot depend
// on the schedule: integer sums and an allgather.
TEST(Reference, AgreesWithPublicApi) {
  const int P = 4;
  const size_t count = 1001;
  std::vector<ncclComm_t> comms(P);
  ASSERT_EQ(ncclCommInitAll(comms.data(), P, nullptr), ncclSuccess);
  for (Collective coll : {Collective::AllReduce, Collective::AllGather}) {
    for (ncclDataType_t type : {ncclInt32, ncclUint8, ncclInt64}) {
      CollCase c;
      c.coll = coll;
      c.nranks = P;
      c.count = count;
      c.chunkElems = 61;
      c.type = type;
      const auto plans = makePlans(c);
      auto want = makeData(c, plans, 11);
      auto api = want;
      ASSERT_EQ(runReference(c, plans, &want), "");
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      for (int r = 0; r < P; ++r) {
        RankData& d = api[size_t(r)];
        if (coll == Collective::AllReduce) {
          ASSERT_EQ(ncclAllReduce(d.input.data(), d.output.data(), count, type, ncclSum, comms[size_t(r)], nullptr),
                    ncclSuccess);
        } else {
          ASSERT_EQ(ncclAllGather(d.input.data(), d.output.data(), count, type, comms[size_t(r)], nullptr),
                    ncclSuccess);
        }
      }
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
      EXPECT_EQ(compareOutputs(c, want, api), "") << describe(c);
    }
  }
  for (ncclComm_t comm : comms) ncclCommDestroy(comm);
}

// Messages by reference (host only; src/engine/lanes/zero_copy.h): one lane
// over two bulk FIFOs, the test playing the bridge at both.
struct ReferenceLane {
  static constexpr uint64_t kCount = 64;
  TestFifo in{braid::executor::Protocol::Bulk, 2, kCount * 4, 0}, out{braid::executor::Protocol::Bulk, 2, kCount * 4, 0};
  std::vector<float> input = std::vector<float>(2 * kCount), output = std::vector<float>(2 * kCount, -1.0f);
  Port* sendPorts[1] = {&out.send};
  Port* recvPorts[1] = {&in.recv};
  OpBuffers ops;
  LaneExec lane;
  ReferenceLane() {
    for (size_t i = 0; i < input.size(); ++i) input[i] = float(i);
    ops.input = reinterpret_cast<const char*>(input.data());
    ops.output = reinterpret_cast<char*>(output.data());
    ops.op = braid::reduce::makeBuiltinOp(ncclSum, ncclFloat32, 2);
    ops.fingerprint = 77;
    lane.sendPorts = sendPorts;
    lane.nsendPorts = 1;
    lane.recvPorts = recvPorts;
    lane.nrecvPorts = 1;
    lane.ops = &ops;
    lane.nops = 1;
    lane.wait.maxPolls = 1000;
  }
  static ExecStep step(braid::schedule::StepKind kind, uint64_t offset, bool byReference) {
    ExecStep s;
    s.kind = kind;
    s.srcBuffer = braid::schedule::Buffer::Input;
    s.dstBuffer = braid::schedule::Buffer::Output;
    s.srcOffset = s.dstOffset = offset;
    s.count = kCount;
    s.sendPort = braid::executor::stepSendsKind(kind) ? 0 : -1;
    s.recvPort = braid::executor::stepReceivesKind(kind) ? 0 : -1;
    s.flags = uint8_t(kStepContribution | (byReference ? kStepSendsByReference : 0));
    return s;
  }
  ExecStatus run(const ExecStep& s) { return runStep<float>(HostGroup(), lane, s); }
  // The peer's message into `in`: its values in its slot, or (as the bridge
  // delivers a message it received in place) the slot pointing at them.
  void arrive(const float* values) { post(values, kCount * 4, false); }
  void arriveAt(const char* at) { post(&at, sizeof at, true); }
  void post(const void* bytes, size_t n, bool byReference) {
    const uint64_t m = in.send.seq + 1;
    memcpy(in.send.fifo.slot(m), bytes, n);
    in.send.fifo.sizes[m % 2] = messageWord(kCount * 4, 77, byReference);
    storeRelease(in.send.fifo.head, m);
    in.send.seq = m;
  }
  // The pointer in out's slot of message m, if its word says by reference.
  const char* referenceOf(uint64_t m) const {
    if (!messageByReference(out.send.fifo.sizes[m % 2])) return nullptr;
    const char* at = nullptr;
    memcpy(&at, out.send.fifo.slot(m), sizeof at);
    return at;
  }
};

TEST(Protocol, AStepSendsByReferenceWhatItsBufferHolds) {
  ReferenceLane r;
  ASSERT_EQ(r.run(ReferenceLane::step(braid::schedule::StepKind::Send, 0, true)), ExecStatus::Ok);
  EXPECT_EQ(r.referenceOf(1), reinterpret_cast<const char*>(r.input.data()));
  EXPECT_EQ(messageBytes(r.out.send.fifo.sizes[1]), ReferenceLane::kCount * 4);
  EXPECT_EQ(messageFingerprint(r.out.send.fifo.sizes[1]), 77u);
  // The reduced chunk goes from the output it was written to.
  std::vector<float> peer(ReferenceLane::kCount, 0.5f);
  r.arrive(peer.data());
  ASSERT_EQ(r.run(ReferenceLane::step(braid::schedule::StepKind::RecvReduceCopySend, ReferenceLane::kCount, true)),
            ExecStatus::Ok);
  EXPECT_EQ(r.referenceOf(2), reinterpret_cast<const char*>(r.output.data() + ReferenceLane::kCount));
  for (uint64_t i = 0; i < ReferenceLane::kCount; ++i)
    ASSERT_EQ(r.output[ReferenceLane::kCount + i], float(ReferenceLane::kCount + i) + 0.5f) << i;
  EXPECT_EQ(r.in.recv.seq, 1u) << "the received slot was not given back";
  // Unmarked, the same step copies into its slot.
  storeRelease(r.out.send.fifo.tail, uint64_t(2));  // the bridge sent both
  ASSERT_EQ(r.run(ReferenceLane::step(braid::schedule::StepKind::Send, 0, false)), ExecStatus::Ok);
  EXPECT_EQ(r.referenceOf(3), nullptr);
  EXPECT_EQ(memcmp(r.out.send.fifo.slot(3), r.input.data(), ReferenceLane::kCount * 4), 0);
}

// A Send that scales its contribution (PreMulSum) cannot send its source as
// it is: marked or not, its message is the scaled copy in its slot.
TEST(Protocol, AScaledSendIsNeverByReference) {
  ReferenceLane r;
  const float half = 0.5f;
  r.ops.op = braid::reduce::makePreMulSum(ncclFloat32, &half);
  ASSERT_EQ(r.run(ReferenceLane::step(braid::schedule::StepKind::Send, 0, true)), ExecStatus::Ok);
  EXPECT_EQ(r.referenceOf(1), nullptr);
  const float* slot = reinterpret_cast<const float*>(r.out.send.fifo.slot(1));
  for (uint64_t i = 0; i < ReferenceLane::kCount; ++i) ASSERT_EQ(slot[i], float(i) * 0.5f) << i;
}

// A message the bridge received into the step's destination is there: the
// step copies nothing. One by reference anywhere else is refused.
TEST(Protocol, AMessageReceivedInPlaceIsTakenOnlyAtItsDestination) {
  ReferenceLane r;
  float* dst = r.output.data();
  for (uint64_t i = 0; i < ReferenceLane::kCount; ++i) dst[i] = 100.0f + float(i);
  r.arriveAt(reinterpret_cast<const char*>(dst));
  ASSERT_EQ(r.run(ReferenceLane::step(braid::schedule::StepKind::Recv, 0, false)), ExecStatus::Ok);
  for (uint64_t i = 0; i < ReferenceLane::kCount; ++i) ASSERT_EQ(dst[i], 100.0f + float(i)) << i;
  EXPECT_EQ(loadAcquire(r.in.recv.fifo.tail), 1u);
  r.arriveAt(reinterpret_cast<const char*>(r.input.data()));
  EXPECT_EQ(r.run(ReferenceLane::step(braid::schedule::StepKind::Recv, 0, false)), ExecStatus::BadStep);
}

}  // namespace
}  // namespace exectest
