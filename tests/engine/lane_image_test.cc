// The lane image (src/engine/lanes/lane_image.h): a program's lanes laid out
// for an address other than where they were written, then copied there, must
// run as written. This is what the CUDA path does with device memory; here the
// "device" is a second host buffer, and the lanes of a group of several
// operations (mixed protocols and datatypes) run on host threads over heap
// FIFOs.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <thread>
#include <tuple>

#include "engine/lanes/lane_image.h"
#include "kernels/executor/host_lane_runner.h"
#include "reduce/host_reduce.h"
#include "schedule/generate.h"

namespace {

using braid::schedule::Collective;
using braid::executor::Port;
using braid::executor::Protocol;
using braid::lanes::LaneLimits;
using braid::lanes::LaneProgram;
using braid::lanes::PortKey;

constexpr int kRanks = 3;
constexpr size_t kSmall = 50, kLarge = 20000;  // LL and bulk at the limits below

braid::schedule::Plan ringAllReduce(int rank, size_t count) {
  braid::schedule::CollShape s;
  s.coll = Collective::AllReduce;
  s.algorithm = braid::schedule::Algorithm::Ring;
  s.rank = rank;
  s.nranks = kRanks;
  s.count = count;
  s.chunkElems = 1024;
  return braid::schedule::generatePlan(s);
}

// One FIFO's memory, with a Port for each end.
struct Fifo {
  std::vector<uint64_t> words;
  Port sender, receiver;
};

// FIFOs keyed by (from, to, channel, protocol), made on first use.
class Fifos {
 public:
  explicit Fifos(const LaneLimits& limits) : limits_(limits) {}
  Port* port(int self, const PortKey& k) {
    const int from = k.send ? self : k.peer, to = k.send ? k.peer : self;
    std::unique_ptr<Fifo>& f = fifos_[std::make_tuple(from, to, k.channel, k.protocol)];
    if (!f) {
      f = std::make_unique<Fifo>();
      const auto layout = braid::executor::fifoLayout(k.protocol, 4, braid::lanes::payloadBytesOf(limits_, k.channel, k.protocol));
      f->words.assign(layout.totalBytes / 8, 0);
      braid::executor::initFifoImage(reinterpret_cast<char*>(f->words.data()), layout, 0);
      f->sender.fifo = braid::executor::fifoViewAt(reinterpret_cast<char*>(f->words.data()), layout);
      f->receiver = f->sender;
    }
    return k.send ? &f->sender : &f->receiver;
  }

 private:
  LaneLimits limits_;
  std::map<std::tuple<int, int, int, braid::executor::Protocol>, std::unique_ptr<Fifo>> fifos_;
};

// Every rank's lanes of a group of two allreduces (LL float32, bulk float64),
// one part each, as the communicators of one process on one stream.
struct RingGroup {
  LaneLimits limits;
  std::unique_ptr<Fifos> fifos;
  uint32_t abortWord = 0;
  std::vector<std::vector<float>> small, smallOut;
  std::vector<std::vector<double>> large, largeOut;
  std::vector<LaneProgram> programs;
  std::vector<braid::lanes::ImagePart> parts;

  RingGroup() : small(kRanks), smallOut(kRanks), large(kRanks), largeOut(kRanks), programs(kRanks), parts(kRanks) {
    limits.llPayloadBytes = 4096;
    limits.channelPayloadBytes = 1024 * sizeof(double);
    fifos = std::make_unique<Fifos>(limits);
    for (int r = 0; r < kRanks; ++r) {
      small[r].assign(kSmall, float(r + 1));
      smallOut[r].assign(kSmall, 0);
      large[r].resize(kLarge);
      for (size_t i = 0; i < kLarge; ++i) large[r][i] = double(i) * (r + 1);
      largeOut[r].assign(kLarge, 0);
      const std::vector<braid::schedule::Plan> plans = {ringAllReduce(r, kSmall), ringAllReduce(r, kLarge)};
      EXPECT_TRUE(buildLaneProgram({{ncclFloat32, Protocol::LL}, {ncclFloat64, Protocol::Bulk}}, plans, limits,
                                   &programs[r])
                      .ok());
      braid::lanes::ImagePart& part = parts[size_t(r)];
      part.program = &programs[r];
      part.ops = {{reinterpret_cast<const char*>(small[r].data()), reinterpret_cast<char*>(smallOut[r].data()),
                   nullptr, braid::reduce::makeBuiltinOp(ncclSum, ncclFloat32, kRanks)},
                  {reinterpret_cast<const char*>(large[r].data()), reinterpret_cast<char*>(largeOut[r].data()),
                   nullptr, braid::reduce::makeBuiltinOp(ncclSum, ncclFloat64, kRanks)}};
      Fifos* f = fifos.get();
      part.portOf = [f, r](const PortKey& k) { return f->port(r, k); };
      part.abortWord = &abortWord;
    }
  }
};

// The lanes of every rank in one block, written for a second buffer and
// copied there.
TEST(LaneImage, ACopyLaidOutForItsNewAddressRunsTheGroup) {
  RingGroup g;
  std::vector<LaneProgram>& programs = g.programs;
  std::vector<braid::lanes::ImagePart>& parts = g.parts;
  const size_t bytes = braid::lanes::laneImageLayout(parts).bytes;
  std::vector<uint64_t> where(bytes / 8, 0xdeadbeef), written(bytes / 8);
  const uintptr_t base = reinterpret_cast<uintptr_t>(where.data());
  ASSERT_TRUE(writeLaneImage(parts, base, written.data()).ok());
  size_t nlanes = 0;
  for (const LaneProgram& p : programs) nlanes += p.lanes.size();
  // Every pointer of a lane into the block points at the copy, not at `written`.
  const auto* before = reinterpret_cast<const braid::executor::LaneExec*>(written.data());
  for (size_t i = 0; i < nlanes; ++i)
    for (uintptr_t p : {reinterpret_cast<uintptr_t>(before[i].steps), reinterpret_cast<uintptr_t>(before[i].stages),
                        reinterpret_cast<uintptr_t>(before[i].ops), reinterpret_cast<uintptr_t>(before[i].sendPorts)}) {
      EXPECT_GE(p, base) << "lane " << i;
      EXPECT_LT(p, base + bytes) << "lane " << i;
    }
  memcpy(where.data(), written.data(), bytes);
  std::fill(written.begin(), written.end(), 0xbad);  // nothing may read the original any more

  auto* lanes = reinterpret_cast<braid::executor::LaneExec*>(where.data());
  std::vector<braid::executor::ExecStatus> status(nlanes, braid::executor::ExecStatus::Ok);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < nlanes; ++i)
    threads.emplace_back([&, i] { status[i] = braid::executor::runLaneOnHost(lanes[i]); });
  for (auto& t : threads) t.join();
  for (auto st : status) EXPECT_EQ(st, braid::executor::ExecStatus::Ok) << execStatusName(st);
  for (int r = 0; r < kRanks; ++r) {
    for (size_t i = 0; i < kSmall; ++i) ASSERT_EQ(g.smallOut[r][i], 6.0f) << "rank " << r << " small " << i;
    for (size_t i = 0; i < kLarge; ++i)
      ASSERT_EQ(g.largeOut[r][i], 6.0 * double(i)) << "rank " << r << " large " << i;
  }
}

// Each LL lane's staging holds the lane's largest LL message, not the whole
// LL payload (4096 B here; two 64 KiB buffers per LL lane made every new call
// shape of a host group an mmap of 132 KiB, its page faults and its zeroing),
// and the group above runs in what it holds.
TEST(LaneImage, LLStagingHoldsTheLanesLargestMessageNotTheWholePayload) {
  RingGroup g;
  const size_t bytes = braid::lanes::laneImageLayout(g.parts).bytes;
  std::vector<uint64_t> image(bytes / 8);
  ASSERT_TRUE(writeLaneImage(g.parts, reinterpret_cast<uintptr_t>(image.data()), image.data()).ok());
  const auto* lanes = reinterpret_cast<const braid::executor::LaneExec*>(image.data());
  size_t at = 0, llLanes = 0;
  for (const LaneProgram& program : g.programs)
    for (const braid::lanes::ProgramLane& lane : program.lanes) {
      const braid::executor::LaneExec& L = lanes[at++];
      if (!lane.anyLL) continue;
      ++llLanes;
      const uint64_t largest = lane.bound.maxLLMessageBytes;
      EXPECT_GT(largest, 0u);
      EXPECT_LE(largest, kSmall * sizeof(float));
      EXPECT_EQ(L.stageBytes, (largest + 7) / 8 * 8);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(L.sendStage) - reinterpret_cast<uintptr_t>(L.recvStage), L.stageBytes);
    }
  EXPECT_GT(llLanes, 0u);
}

// An image refreshed for a launch's new buffers, fingerprints, beacons and
// failure word (refreshLaneImage) is byte for byte the image written afresh
// for them, peer tables included.
TEST(LaneImage, ARefreshedImageEqualsOneWrittenAfresh) {
  RingGroup g;
  std::vector<braid::executor::LaneBeacon> beacons(64);
  uint32_t failureA = 0, failureB = 0;
  std::vector<uintptr_t> peerTable = {0x1000, 0x2000, 0x3000};
  for (braid::lanes::ImagePart& part : g.parts) {
    part.beacons = beacons.data();
    part.failureWord = &failureA;
    part.peerOps = {peerTable, {}};
    part.ops[0].fingerprint = 11;
  }
  const braid::lanes::LaneImageLayout layout = braid::lanes::laneImageLayout(g.parts);
  std::vector<uint64_t> where(layout.bytes / 8);
  const uintptr_t base = reinterpret_cast<uintptr_t>(where.data());
  std::vector<uint64_t> refreshed(layout.written / 8), fresh(layout.written / 8);
  ASSERT_TRUE(writeLaneImage(g.parts, base, refreshed.data()).ok());
  // The next launch: other buffers (in place), another call's fingerprints,
  // other beacons and failure word.
  size_t lane = 0;
  for (size_t p = 0; p < g.parts.size(); ++p) {
    braid::lanes::ImagePart& part = g.parts[p];
    part.ops[0].input = part.ops[0].output;
    part.ops[0].fingerprint = 12;
    part.ops[1].output = reinterpret_cast<char*>(g.large[p].data());
    part.ops[1].fingerprint = 99;
    part.beacons = beacons.data() + 32 + lane;
    lane += part.program->lanes.size();
    part.failureWord = &failureB;
  }
  ASSERT_TRUE(writeLaneImage(g.parts, base, fresh.data()).ok());
  ASSERT_NE(refreshed, fresh);
  braid::lanes::refreshLaneImage(g.parts, layout, refreshed.data());
  EXPECT_EQ(refreshed, fresh);
}

}  // namespace
