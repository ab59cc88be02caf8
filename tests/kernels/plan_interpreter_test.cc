// The plan interpreter (kernels/executor) against the reference's
// arithmetic (tests/kernels/exec_harness.h), bit for bit: generated plans of
// every collective and algorithm for 1..8 ranks, both protocols, odd counts
// and chunks, all 12 datatypes for AllReduce with several operators.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reduce/host_reduce.h"
#include "tests/kernels/exec_harness.h"

namespace exectest {
namespace {

using braid::schedule::Algorithm;
using braid::schedule::Collective;
using braid::executor::Protocol;

const ncclDataType_t kAllTypes[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                    ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                    ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

const Protocol kProtocols[] = {Protocol::Bulk, Protocol::LL};

class ScheduleSweep : public ::testing::TestWithParam<CollAlgo> {};

// 1..8 ranks, both protocols, two (count, chunk) pairs that divide nothing,
// one and two channels, roots at both ends; float32 sum and int8 with the
// reduction most likely to show a misplaced operand (max, or avg where it
// means SumPostDiv at the final step).
TEST_P(ScheduleSweep, MatchesReferenceBitForBit) {
  const CollAlgo ca = GetParam();
  struct Size {
    size_t count, chunk;
  };
  const Size sizes[] = {{37, 5}, {1001, 64}};
  int runs = 0;
  for (int p = 1; p <= 8; ++p) {
    for (const Size& sz : sizes) {
      for (Protocol proto : kProtocols) {
        CollCase c;
        c.coll = ca.coll;
        c.algorithm = ca.algorithm;
        c.nranks = p;
        c.count = sz.count;
        c.chunkElems = sz.chunk;
        c.nchannels = 1 + (p + int(sz.chunk)) % 2;
        c.root = (sz.count + size_t(p)) % 2 == 0 ? 0 : p - 1;
        c.type = (p % 2 == 0) ? ncclFloat32 : ncclInt8;
        c.op = c.type == ncclInt8 ? (p % 4 == 1 ? ncclAvg : ncclMax) : ncclSum;
        RunConfig cfg;
        cfg.protocol = proto;
        cfg.nslots = 2 + uint32_t(p % 2);
        EXPECT_EQ(runAndCompare(c, cfg, uint64_t(p) * 1000 + sz.count), "");
        // The host runner's way: every lane of every rank taking turns on one
        // thread, resuming where it stopped; as few slots as the schedules
        // allow (bulk holds its received slot while it waits to send).
        cfg.oneThread = true;
        cfg.nslots = proto == Protocol::LL ? 1 : 2;
        EXPECT_EQ(runAndCompare(c, cfg, uint64_t(p) * 1000 + sz.count), "") << "in turns on one thread";
        ++runs;
      }
    }
  }
  EXPECT_EQ(runs, 8 * 2 * 2);
}

// Turns on one thread work only because a lane gives its turn back where it
// would wait: with lanes that wait in place the first wait never ends.
TEST(PlanInterpreter, TurnsOnOneThreadNeedResumableLanes) {
  CollCase c;
  c.coll = Collective::AllReduce;
  c.algorithm = Algorithm::Ring;
  c.nranks = 3;
  c.count = 300;
  c.chunkElems = 16;
  RunConfig cfg;
  cfg.oneThread = true;
  cfg.maxPolls = 1000;
  EXPECT_EQ(runAndCompare(c, cfg, 7), "");
  cfg.resumable = false;
  EXPECT_NE(runAndCompare(c, cfg, 7).find("timed out"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(AllSchedules, ScheduleSweep, ::testing::ValuesIn(everySchedule()),
                         [](const ::testing::TestParamInfo<CollAlgo>& info) { return scheduleName(info.param); });

struct TypeOp {
  ncclDataType_t type;
  ncclRedOp_t op;
};

class AllReduceTypes : public ::testing::TestWithParam<ncclDataType_t> {};

// Every datatype with sum, avg (PreMulSum for floating types, SumPostDiv for
// integers), prod, max and min over the allreduce schedules.
TEST_P(AllReduceTypes, EveryOpMatchesReference) {
  const ncclDataType_t type = GetParam();
  const ncclRedOp_t ops[] = {ncclSum, ncclAvg, ncclProd, ncclMax, ncclMin};
  const Algorithm algos[] = {Algorithm::Ring, Algorithm::Tree, Algorithm::RecursiveDoubling,
                             Algorithm::HalvingDoubling, Algorithm::PeerAccess};
  for (ncclRedOp_t op : ops) {
    for (Algorithm a : algos) {
      for (Protocol proto : kProtocols) {
        CollCase c;
        c.algorithm = a;
        c.nranks = (op == ncclSum || op == ncclAvg) ? 5 : 3;
        c.count = 211;
        c.chunkElems = 13;
        c.type = type;
        c.op = op;
        c.inPlace = op == ncclAvg;
        RunConfig cfg;
        cfg.protocol = proto;
        EXPECT_EQ(runAndCompare(c, cfg, 77 + uint64_t(type)), "");
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, AllReduceTypes, ::testing::ValuesIn(kAllTypes),
                         [](const ::testing::TestParamInfo<ncclDataType_t>& info) {
                           return std::string(braid::reduce::typeName(info.param));
                         });

// The reduced collectives other than allreduce, for every type with avg (the
// PreMulSum/SumPostDiv placement: contribution and final flags).
TEST(PlanInterpreter, ReduceAndReduceScatterAvgEveryType) {
  for (ncclDataType_t type : kAllTypes) {
    for (CollAlgo ca : {CollAlgo{Collective::Reduce, Algorithm::Tree}, CollAlgo{Collective::Reduce, Algorithm::Ring},
                        CollAlgo{Collective::ReduceScatter, Algorithm::HalvingDoubling},
                        CollAlgo{Collective::ReduceScatter, Algorithm::PeerAccess}}) {
      CollCase c;
      c.coll = ca.coll;
      c.algorithm = ca.algorithm;
      c.nranks = 6;
      c.root = 4;
      c.count = 53;
      c.chunkElems = 11;
      c.type = type;
      c.op = ncclAvg;
      RunConfig cfg;
      cfg.protocol = type % 2 == 0 ? Protocol::Bulk : Protocol::LL;
      EXPECT_EQ(runAndCompare(c, cfg, 5 + uint64_t(type)), "");
    }
  }
}

}  // namespace
}  // namespace exectest

namespace exectest {
namespace {

// A GPU returns its canonical NaN where the host keeps an operand's payload:
// the comparison takes any NaN for any NaN of a floating type, and nothing else.
TEST(CompareOutputs, AnyNaNMatchesAnyNaNAndNothingElse) {
  auto one = [](ncclDataType_t type, std::vector<uint8_t> bytes) {
    CollCase c;
    c.type = type;
    std::vector<RankData> d(1);
    d[0].output = std::move(bytes);
    return std::make_pair(c, d);
  };
  auto [f32, wantNaN] = one(ncclFloat32, {0xb3, 0xd6, 0xe7, 0xff});  // 0xffe7d6b3: a NaN with a payload
  auto [unused, gotCanon] = one(ncclFloat32, {0xff, 0xff, 0xff, 0x7f});  // 0x7fffffff
  auto [unused2, gotInf] = one(ncclFloat32, {0x00, 0x00, 0x80, 0x7f});  // +inf
  EXPECT_EQ(compareOutputs(f32, wantNaN, gotCanon), "");
  EXPECT_NE(compareOutputs(f32, wantNaN, gotInf), "");
  EXPECT_NE(compareOutputs(f32, gotInf, wantNaN), "");
  auto [f16, want16] = one(ncclFloat16, {0x7f, 0x7e});  // 0x7e7f
  auto [unused3, got16] = one(ncclFloat16, {0xff, 0x7f});
  auto [unused4, one16] = one(ncclFloat16, {0x00, 0x3c});  // 1.0
  EXPECT_EQ(compareOutputs(f16, want16, got16), "");
  EXPECT_NE(compareOutputs(f16, want16, one16), "");
  // Integers compare bit for bit.
  auto [i32, a] = one(ncclInt32, {0xb3, 0xd6, 0xe7, 0xff});
  auto [unused5, b] = one(ncclInt32, {0xff, 0xff, 0xff, 0x7f});
  EXPECT_NE(compareOutputs(i32, a, b), "");
}

}  // namespace
}  // namespace exectest
