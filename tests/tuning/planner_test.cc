// The planner: model-driven choice, chunking, NCCL_ALGO / NCCL_PROTO overrides,
// safety against algorithms without a generator, and its per-call cost.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "reduce/host_reduce.h"
#include "tuning/planner.h"

namespace braid {
namespace {

using A = schedule::Algorithm;
using C = schedule::Collective;

// The generators as they are being completed (Tree, RecursiveDoubling and
// HalvingDoubling), independent of what algorithmSupports() says today.
uint8_t fullSet(C c) {
  auto b = [](A a) { return static_cast<uint8_t>(1u << static_cast<int>(a)); };
  switch (c) {
    case C::AllReduce: return b(A::Ring) | b(A::Tree) | b(A::RecursiveDoubling) | b(A::HalvingDoubling);
    case C::AllGather: return b(A::Ring) | b(A::RecursiveDoubling);
    case C::ReduceScatter: return b(A::Ring) | b(A::HalvingDoubling);
    case C::Broadcast:
    case C::Reduce: return b(A::Ring) | b(A::Tree);
    default: return b(A::Direct);
  }
}

class Planner : public ::testing::Test {
 protected:
  tuning::TuningInput input(C coll, int nranks, size_t bytes, tuning::TransportClass tc = tuning::TransportClass::SharedMemory) {
    tuning::TuningInput in;
    in.coll = coll;
    in.nranks = nranks;
    in.datatype = ncclFloat32;
    in.count = bytes / 4;
    in.transport = tc;
    in.slotBytes = 512 * 1024;
    in.nchannels = 1;
    in.filter = &filter_;
    in.calibration = &cal_;
    return in;
  }
  tuning::PlanChoice choose(const tuning::TuningInput& in, double* per = nullptr) {
    return choosePlanAmong(in, fullSet(in.coll), per);
  }
  void useEnv(const char* algo, const char* proto) {
    if (algo) setenv("NCCL_ALGO", algo, 1);
    if (proto) setenv("NCCL_PROTO", proto, 1);
    filter_ = tuning::algoFilterFromEnv();
    unsetenv("NCCL_ALGO");
    unsetenv("NCCL_PROTO");
  }

  tuning::AlgoFilter filter_;
  tuning::CalibrationParams cal_ = tuning::defaultCalibration();
};

bool isLog(A a) { return a == A::RecursiveDoubling || a == A::HalvingDoubling; }

TEST_F(Planner, SmallCallsTakeLogarithmicAlgorithmsLargeOnesTheRing) {
  for (tuning::TransportClass tc : {tuning::TransportClass::InProcess, tuning::TransportClass::SharedMemory, tuning::TransportClass::Tcp})
    for (int p : {4, 8, 16}) {
      SCOPED_TRACE(std::string(transportClassName(tc)) + " p=" + std::to_string(p));
      tuning::PlanChoice small = choose(input(C::AllReduce, p, 1024, tc));
      EXPECT_TRUE(isLog(small.algorithm)) << algorithmName(small.algorithm);
      EXPECT_FALSE(small.forced);
      tuning::PlanChoice large = choose(input(C::AllReduce, p, 256 << 20, tc));
      EXPECT_EQ(large.algorithm, A::Ring);
      EXPECT_EQ(large.chunkElems, 512u * 1024 / 4) << "the ring moves whole slots";
      EXPECT_EQ(large.protocol, tuning::Protocol::Simple);
      tuning::PlanChoice gather = choose(input(C::AllGather, p, 1024 * p, tc));
      EXPECT_EQ(gather.algorithm, A::RecursiveDoubling);
    }
}

TEST_F(Planner, PredictionIsTheModelsAndTheBest) {
  double per[schedule::kNumAlgorithms];
  tuning::TuningInput in = input(C::AllReduce, 8, 4096);
  tuning::PlanChoice c = choose(in, per);
  schedule::ModelShape s;
  s.nranks = 8;
  s.bytes = 4096;
  s.chunkBytes = static_cast<double>(c.chunkElems * 4);
  EXPECT_DOUBLE_EQ(c.predictedSeconds,
                   predictSeconds(C::AllReduce, c.algorithm, s, costParams(cal_, in.transport, ncclFloat32)));
  for (int a = 0; a < schedule::kNumAlgorithms; ++a) EXPECT_GE(per[a], c.predictedSeconds) << a;
  EXPECT_TRUE(std::isinf(per[static_cast<int>(A::Direct)]));
}

TEST_F(Planner, ChunksNeverExceedTheSlotAndPipelinesGetSmallerOnes) {
  for (C coll : {C::AllReduce, C::Broadcast, C::Reduce, C::AllGather, C::ReduceScatter, C::AllToAll, C::Send})
    for (size_t slot : {size_t(4096), size_t(65536), size_t(1) << 20})
      for (size_t bytes = 4; bytes <= (size_t(1) << 28); bytes *= 8) {
        tuning::TuningInput in = input(coll, 8, bytes);
        in.slotBytes = slot;
        in.datatype = ncclFloat64;
        in.count = std::max<size_t>(1, bytes / 8);
        tuning::PlanChoice c = choose(in);
        EXPECT_GE(c.chunkElems, 1u);
        EXPECT_LE(c.chunkElems * 8, slot) << collectiveName(coll) << " " << bytes;
        EXPECT_GT(c.predictedSeconds, 0);
      }
  // A 1 MiB broadcast on a chain (no tree generator): pipelining pays.
  tuning::TuningInput in = input(C::Broadcast, 8, 1 << 20);
  tuning::PlanChoice c = choosePlanAmong(in, 1u << static_cast<int>(A::Ring), nullptr);
  EXPECT_EQ(c.algorithm, A::Ring);
  EXPECT_LT(c.chunkElems * 4, in.slotBytes);
}

TEST_F(Planner, AlgoEnvOverridesTheModel) {
  useEnv("allreduce:ring", nullptr);
  tuning::PlanChoice c = choose(input(C::AllReduce, 8, 1024));
  EXPECT_EQ(c.algorithm, A::Ring);
  EXPECT_TRUE(c.forced);
  useEnv("Tree", nullptr);
  EXPECT_EQ(choose(input(C::AllReduce, 8, 256 << 20)).algorithm, A::Tree);
  EXPECT_EQ(choose(input(C::Broadcast, 8, 1024)).algorithm, A::Tree);
  useEnv("^RecursiveDoubling,HalvingDoubling", nullptr);
  EXPECT_FALSE(isLog(choose(input(C::AllReduce, 8, 1024)).algorithm));
  useEnv("allreduce:rd", nullptr);
  EXPECT_EQ(choose(input(C::AllReduce, 8, 256 << 20)).algorithm, A::RecursiveDoubling);
}

TEST_F(Planner, FilterWithNothingUsableFallsBackToTheModel) {
  const A modelChoice = choose(input(C::AllGather, 8, 8192)).algorithm;
  useEnv("allgather:tree", nullptr);  // no tree all-gather
  tuning::PlanChoice c = choose(input(C::AllGather, 8, 8192));
  EXPECT_EQ(c.algorithm, modelChoice);
  useEnv("NVLS", nullptr);  // nothing braid has
  EXPECT_EQ(choose(input(C::AllReduce, 8, 1024)).algorithm, A::RecursiveDoubling);
  // A global list does not touch all-to-all (Direct only).
  useEnv("Ring", nullptr);
  tuning::PlanChoice a2a = choose(input(C::AllToAll, 8, 8192));
  EXPECT_EQ(a2a.algorithm, A::Direct);
  EXPECT_FALSE(a2a.forced);
}

TEST_F(Planner, ProtoSetsTheChunkClass) {
  useEnv(nullptr, "LL");
  tuning::PlanChoice c = choose(input(C::AllReduce, 8, 64 << 20));
  EXPECT_EQ(c.protocol, tuning::Protocol::LL);
  EXPECT_LE(c.chunkElems * 4, 8u << 10);
  EXPECT_TRUE(c.forced);
  useEnv(nullptr, "LL128");
  c = choose(input(C::AllReduce, 8, 64 << 20));
  EXPECT_GT(c.chunkElems * 4, 8u << 10);
  EXPECT_LE(c.chunkElems * 4, 64u << 10);
  useEnv(nullptr, "Simple");
  c = choose(input(C::Broadcast, 8, 64 << 20));
  EXPECT_GT(c.chunkElems * 4, 64u << 10);
  // Per collective: LL for all-reduce only.
  useEnv(nullptr, "allreduce:LL");
  EXPECT_EQ(choose(input(C::AllReduce, 8, 64 << 20)).protocol, tuning::Protocol::LL);
  EXPECT_EQ(choose(input(C::AllGather, 8, 64 << 20)).protocol, tuning::Protocol::Simple);
  // Unset: a small call is labelled LL (any chunk class fits it; the smallest is named).
  useEnv(nullptr, nullptr);
  EXPECT_EQ(choose(input(C::AllReduce, 8, 1024)).protocol, tuning::Protocol::LL);
}

TEST_F(Planner, FasterTransportsPredictLess) {
  double prev = 0;
  for (tuning::TransportClass tc : {tuning::TransportClass::InProcess, tuning::TransportClass::SharedMemory, tuning::TransportClass::Tcp}) {
    double t = choose(input(C::AllReduce, 8, 1 << 20, tc)).predictedSeconds;
    EXPECT_GT(t, prev) << transportClassName(tc);
    prev = t;
  }
}

TEST_F(Planner, ChoosePlanOnlyPicksImplementedAlgorithms) {
  for (C coll : {C::AllReduce, C::ReduceScatter, C::AllGather, C::Broadcast, C::Reduce, C::AllToAll,
                 C::Gather, C::Scatter, C::Send, C::Recv})
    for (size_t bytes : {size_t(64), size_t(1) << 16, size_t(1) << 26}) {
      tuning::PlanChoice c = choosePlan(input(coll, 8, bytes));
      EXPECT_TRUE(algorithmSupports(c.algorithm, coll))
          << collectiveName(coll) << " got " << algorithmName(c.algorithm);
    }
}

// What choosePlan says must be something generatePlan builds: a plan whose
// steps never exceed the chosen chunk (so never a slot).
TEST_F(Planner, ChoicesGenerateValidPlans) {
  for (C coll : {C::AllReduce, C::ReduceScatter, C::AllGather, C::Broadcast, C::Reduce, C::AllToAll})
    for (int p : {2, 5, 8})
      for (size_t bytes : {size_t(256), size_t(1) << 16, size_t(3) << 20}) {
        tuning::TuningInput in = input(coll, p, bytes);
        in.slotBytes = 128 * 1024;
        const tuning::PlanChoice c = choosePlan(in);
        schedule::CollShape shape;
        shape.coll = coll;
        shape.algorithm = c.algorithm;
        shape.nranks = p;
        shape.count = in.count;
        shape.chunkElems = c.chunkElems;
        shape.nchannels = c.nchannels;
        for (int r = 0; r < p; ++r) {
          shape.rank = r;
          schedule::Plan plan = generatePlan(shape);
          EXPECT_FALSE(plan.lanes.empty()) << collectiveName(coll) << " " << algorithmName(c.algorithm);
          for (const schedule::Lane& lane : plan.lanes)
            for (const schedule::Step& st : lane.steps) {
              if (st.kind == schedule::StepKind::Copy) continue;
              EXPECT_LE(st.count, c.chunkElems) << algorithmName(c.algorithm);
            }
        }
      }
}

TEST_F(Planner, LogLineNamesChoiceAndAlternatives) {
  double per[schedule::kNumAlgorithms];
  tuning::TuningInput in = input(C::AllReduce, 8, 4096);
  tuning::PlanChoice c = choose(in, per);
  char line[512];
  formatPlanChoice(in, c, per, line, sizeof(line));
  std::string s(line);
  EXPECT_EQ(s.rfind("AllReduce 4096 B x 8 ranks (SharedMemory): RecursiveDoubling/LL chunk 2048 elems 1 ch, predicted ", 0), 0u) << s;
  EXPECT_NE(s.find("(Ring "), std::string::npos) << s;
  EXPECT_NE(s.find("HalvingDoubling "), std::string::npos) << s;
  EXPECT_EQ(s.find("Direct"), std::string::npos) << s;
  char tiny[16];
  formatPlanChoice(in, c, per, tiny, sizeof(tiny));  // truncates safely
  EXPECT_EQ(strlen(tiny), sizeof(tiny) - 1);
}

TEST_F(Planner, SlowestTransportClass) {
  PeerInfo a{}, b{};
  a.processId = b.processId = 7;
  a.hostHash = b.hostHash = 1;
  std::vector<PeerInfo> peers{a, b};
  EXPECT_EQ(tuning::slowestTransportClass(peers, false), tuning::TransportClass::InProcess);
  peers[1].processId = 8;
  EXPECT_EQ(tuning::slowestTransportClass(peers, false), tuning::TransportClass::SharedMemory);
  EXPECT_EQ(tuning::slowestTransportClass(peers, true), tuning::TransportClass::Tcp);
  peers[1].hostHash = 2;
  EXPECT_EQ(tuning::slowestTransportClass(peers, false), tuning::TransportClass::Tcp);
}

TEST_F(Planner, IsCheapAndDeterministic) {
  tuning::TuningInput in = input(C::AllReduce, 8, 3 << 20);
  const tuning::PlanChoice first = choose(in);
  const int calls = 20000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) {
    in.count = (size_t(1) << (i % 26)) + 1;
    volatile size_t sink = choose(in).chunkElems;
    (void)sink;
  }
  double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / calls;
  printf("choosePlanAmong: %.2f us per call\n", us);
  EXPECT_LT(us, 20.0);
  in.count = (3 << 20) / 4;
  tuning::PlanChoice again = choose(in);
  EXPECT_EQ(again.algorithm, first.algorithm);
  EXPECT_EQ(again.chunkElems, first.chunkElems);
  EXPECT_EQ(again.predictedSeconds, first.predictedSeconds);
}

// The plan interpreter's protocol: LL below alpha/beta bytes of the call's
// transport class, bulk above; NCCL_PROTO overrides where it names one side
// only; never LL above the LL slot.
TEST_F(Planner, LaneProtocolFollowsAlphaOverBetaAndNcclProto) {
  for (tuning::TransportClass tc : {tuning::TransportClass::InProcess, tuning::TransportClass::SharedMemory, tuning::TransportClass::Tcp}) {
    SCOPED_TRACE(transportClassName(tc));
    const tuning::TuningInput in = input(C::AllReduce, 4, 4096, tc);
    const tuning::CostParams p = costParams(cal_, tc, ncclFloat32);
    const double threshold = p.alpha / p.beta;
    ASSERT_GT(threshold, 16.0) << "a calibration that never prefers LL would prove nothing";
    EXPECT_TRUE(laneUsesLL(in, 16, uint64_t(1) << 40));
    EXPECT_FALSE(laneUsesLL(in, uint64_t(threshold * 2) + 64, uint64_t(1) << 40));
    EXPECT_FALSE(laneUsesLL(in, 16, 8)) << "a message larger than the LL slot";
  }
  useEnv(nullptr, "LL");
  EXPECT_TRUE(laneUsesLL(input(C::AllReduce, 4, 4096), 60000, 65536)) << "NCCL_PROTO=LL forces LL";
  useEnv(nullptr, "Simple");
  EXPECT_FALSE(laneUsesLL(input(C::AllReduce, 4, 4096), 16, 65536)) << "NCCL_PROTO=Simple forbids LL";
  useEnv(nullptr, "^LL");
  EXPECT_FALSE(laneUsesLL(input(C::AllReduce, 4, 4096), 16, 65536)) << "NCCL_PROTO=^LL forbids LL";
}

// A wire type keeps every algorithm but PeerAccess: recursive doubling runs
// under it (its partners keep what they send, so every rank gets the same
// bits: tests/mp/wire_type_test.cc); reproducible mode's fixed point runs
// the ring only.
TEST_F(Planner, WireTypesKeepRecursiveDoublingFixedPointTheRing) {
  tuning::TuningInput in = input(C::AllReduce, 8, 1024);
  in.peerAccess = true;
  in.wire = reduce::WireType::Fp8E4M3;
  useEnv("allreduce:rd", nullptr);
  EXPECT_EQ(choosePlan(in).algorithm, A::RecursiveDoubling);
  useEnv("allreduce:PeerAccess", nullptr);
  EXPECT_NE(choosePlan(in).algorithm, A::PeerAccess) << "PeerAccess moves no message to narrow";
  useEnv("allreduce:rd", nullptr);
  in.wire = reduce::WireType::Fixed64;
  EXPECT_EQ(choosePlan(in).algorithm, A::Ring);
}

}  // namespace
}  // namespace braid
