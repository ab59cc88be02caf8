// The PeerAccess algorithm on the host runner (engine/lanes/peer_access.h):
// when one thread's group holds every rank of a communicator, each with one
// matching call, the ranks reduce straight from each other's buffers (one
// PeerReduce step per lane, no FIFO); any other group keeps the FIFO
// schedules. Real communicators of this process (ncclCommInitAll).
#include <gtest/gtest.h>
#include <nccl.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "common/local_comms.h"
#include "common/nccl_types.h"
#include "engine/comm.h"
#include "engine/lanes/lane_group.h"
#include "engine/lanes/peer_access.h"
#include "reduce/host_reduce.h"

namespace braid {
namespace lanes {
namespace {

constexpr int kRanks = 4;

engine::Task allReduceOn(ncclComm* comm, size_t count, ncclDataType_t type = ncclFloat32) {
  engine::Task t;
  t.comm = comm;
  t.coll = schedule::Collective::AllReduce;
  t.count = count;
  t.type = type;
  t.op = reduce::makeBuiltinOp(ncclSum, type, comm->nranks);
  return t;
}

std::vector<const engine::Task*> pointers(const std::vector<engine::Task>& tasks) {
  std::vector<const engine::Task*> p;
  for (const engine::Task& t : tasks) p.push_back(&t);
  return p;
}

PeerAccessGroups groupsOf(const std::vector<engine::Task>& tasks) {
  return peerAccessGroups(pointers(tasks), [](const engine::Task&, const engine::Task&) { return true; });
}

TEST(PeerAccessGroups, OnlyWholeCommunicatorsWithOneMatchingCallEach) {
  braidtest::LocalComms a(kRanks), b(kRanks);
  ASSERT_TRUE(a.ok() && b.ok()) << a.error() << b.error();
  std::vector<engine::Task> whole;
  for (int r = kRanks - 1; r >= 0; --r) whole.push_back(allReduceOn(a[r], 100));  // any order
  const PeerAccessGroups g = groupsOf(whole);
  ASSERT_EQ(g.size(), size_t(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(g.at(a[r]).size(), size_t(kRanks));
    for (int k = 0; k < kRanks; ++k) EXPECT_EQ(g.at(a[r])[size_t(k)], a[k]);  // rank order
  }

  std::vector<engine::Task> beside = whole;
  beside.push_back(allReduceOn(b[0], 100));
  EXPECT_EQ(groupsOf(beside).size(), size_t(kRanks)) << "a whole communicator beside another's lone call";
  EXPECT_TRUE(groupsOf({whole[0]}).empty()) << "one call";

  std::vector<engine::Task> missing(whole.begin(), whole.end() - 1);
  EXPECT_TRUE(groupsOf(missing).empty()) << "a rank is not in the group";
  std::vector<engine::Task> twice = whole;
  twice.push_back(allReduceOn(a[0], 100));
  EXPECT_TRUE(groupsOf(twice).empty()) << "a rank has two calls";
  std::vector<engine::Task> counts = whole;
  counts[1].count = 99;
  EXPECT_TRUE(groupsOf(counts).empty()) << "the calls differ";
  std::vector<engine::Task> types = whole;
  types[2].type = ncclInt32;
  EXPECT_TRUE(groupsOf(types).empty()) << "the datatypes differ";
  std::vector<engine::Task> outOfStep = whole;
  outOfStep[3].callNumber = 7;
  EXPECT_TRUE(groupsOf(outOfStep).empty()) << "a rank is at another call";
  std::vector<engine::Task> mixed = {allReduceOn(a[0], 100), allReduceOn(a[1], 100), allReduceOn(b[2], 100),
                                     allReduceOn(b[3], 100)};
  EXPECT_TRUE(groupsOf(mixed).empty()) << "ranks of two communicators";
  std::vector<engine::Task> broadcast = whole;
  for (engine::Task& t : broadcast) t.coll = schedule::Collective::Broadcast;
  EXPECT_TRUE(groupsOf(broadcast).empty()) << "no peer-access broadcast";
  EXPECT_TRUE(peerAccessGroups(pointers(whole), [](const engine::Task& x, const engine::Task& y) {
                return x.comm->rank / 2 == y.comm->rank / 2;
              }).empty())
      << "ranks that would not run together";
}

// The step kinds of the lanes the host runner would run for `tasks`.
std::vector<schedule::StepKind> stepKinds(const std::vector<engine::Task>& tasks, size_t* ports) {
  LaneGroup group;
  const Result r = prepareLaneGroup(tasks, &group);
  EXPECT_TRUE(r.ok()) << r.message();
  std::vector<schedule::StepKind> kinds;
  *ports = 0;
  for (const auto& c : group.comms) {
    *ports += portsOf(*c->program).size();
    for (const ProgramLane& lane : c->program->lanes)
      for (const executor::ExecStep& s : lane.bound.steps) kinds.push_back(s.kind);
  }
  return kinds;
}

TEST(PeerAccessPlans, AWholeCommunicatorInOneGroupUsesNoFifo) {
  braidtest::LocalComms comms(kRanks);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<float> in(kRanks * 4096), out(kRanks * 4096);
  std::vector<engine::Task> tasks;
  for (int r = 0; r < kRanks; ++r) {
    tasks.push_back(allReduceOn(comms[r], 4096));
    tasks.back().sendbuff = in.data();
    tasks.back().recvbuff = out.data();
  }
  size_t ports = 0;
  const std::vector<schedule::StepKind> kinds = stepKinds(tasks, &ports);
  ASSERT_FALSE(kinds.empty());
  for (schedule::StepKind k : kinds) EXPECT_EQ(k, schedule::StepKind::PeerReduce);
  EXPECT_EQ(ports, 0u);
  // Two calls a rank: FIFOs (a later call may read what an earlier one's
  // lanes of another rank still write).
  const std::vector<engine::Task> once = tasks;
  tasks.insert(tasks.end(), once.begin(), once.end());
  EXPECT_NE(stepKinds(tasks, &ports).front(), schedule::StepKind::PeerReduce);
  EXPECT_GT(ports, 0u);
}

TEST(PeerAccessPlans, NcclAlgoRingKeepsTheRing) {
  braidtest::LocalComms comms(kRanks, {{"NCCL_ALGO", "ring"}});
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<float> buf(4096);
  std::vector<engine::Task> tasks;
  for (int r = 0; r < kRanks; ++r) {
    tasks.push_back(allReduceOn(comms[r], 4096));
    tasks.back().sendbuff = tasks.back().recvbuff = buf.data();
  }
  size_t ports = 0;
  EXPECT_NE(stepKinds(tasks, &ports).front(), schedule::StepKind::PeerReduce);
  EXPECT_GT(ports, 0u);
}

// ---- results through the API, one thread driving every rank ----

// A small integer per rank and element: sums, products and averages of 4 of
// them are exact in every type tested.
double valueOf(int rank, size_t i) { return double(1 + (i * 7 + size_t(rank) * 3) % 3); }

double expectedOf(ncclRedOp_t op, size_t i, double scalar) {
  double acc = op == ncclProd ? 1 : op == ncclMax ? -1e9 : op == ncclMin ? 1e9 : 0;
  for (int r = 0; r < kRanks; ++r) {
    const double v = valueOf(r, i);
    acc = op == ncclProd ? acc * v : op == ncclMax ? std::max(acc, v) : op == ncclMin ? std::min(acc, v)
                                                                                      : acc + v * scalar;
  }
  return op == ncclAvg ? acc / kRanks : acc;
}

// Elements of `type` from doubles (the tests' own conversions).
std::vector<char> encode(ncclDataType_t type, const std::vector<double>& v) {
  std::vector<char> out(v.size() * reduce::typeSize(type));
  for (size_t i = 0; i < v.size(); ++i) ncclt::store(ncclt::typeInfo(type), out.data(), i, v[i]);
  return out;
}

struct Case {
  ncclDataType_t type;
  ncclRedOp_t op;
  bool inPlace;
  bool preMulSum;
};

std::string runAllReduce(const braidtest::LocalComms& comms, const Case& c, size_t count) {
  const size_t size = reduce::typeSize(c.type);
  std::vector<std::vector<char>> in(kRanks), out(kRanks);
  std::vector<ncclRedOp_t> ops(kRanks, c.op);
  const float scalar = 2;
  for (int r = 0; r < kRanks; ++r) {
    std::vector<double> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = valueOf(r, i);
    in[size_t(r)] = encode(c.type, v);
    out[size_t(r)].assign(count * size, char(0x5a));
    if (c.preMulSum) {
      std::vector<char> s = encode(c.type, {scalar});
      if (ncclRedOpCreatePreMulSum(&ops[size_t(r)], s.data(), c.type, ncclScalarHostImmediate, comms[r]) !=
          ncclSuccess)
        return "ncclRedOpCreatePreMulSum";
    }
  }
  if (ncclGroupStart() != ncclSuccess) return "ncclGroupStart";
  for (int r = 0; r < kRanks; ++r) {
    void* recv = c.inPlace ? in[size_t(r)].data() : out[size_t(r)].data();
    if (ncclAllReduce(in[size_t(r)].data(), recv, count, c.type, ops[size_t(r)], comms[r], nullptr) != ncclSuccess)
      return std::string("ncclAllReduce: ") + ncclGetLastError(comms[r]);
  }
  if (ncclGroupEnd() != ncclSuccess) return std::string("ncclGroupEnd: ") + ncclGetLastError(nullptr);
  for (int r = 0; r < kRanks; ++r) {
    if (c.preMulSum) ncclRedOpDestroy(ops[size_t(r)], comms[r]);
    const std::vector<char>& got = c.inPlace ? in[size_t(r)] : out[size_t(r)];
    for (size_t i = 0; i < count; ++i) {
      const double want = expectedOf(c.preMulSum ? ncclSum : c.op, i, c.preMulSum ? scalar : 1);
      const double have = ncclt::load(ncclt::typeInfo(c.type), got.data(), i);
      if (have != want)
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + ": " + std::to_string(have) +
               ", expected " + std::to_string(want);
    }
  }
  return "";
}

TEST(PeerAccessResults, AllReduceEveryTypeAndOpInAndOutOfPlace) {
  braidtest::LocalComms comms(kRanks);
  ASSERT_TRUE(comms.ok()) << comms.error();
  const ncclDataType_t types[] = {ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64,
                                  ncclFloat16, ncclFloat32, ncclFloat64, ncclBfloat16};
  for (ncclDataType_t type : types)
    for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg})
      for (bool inPlace : {false, true})
        for (size_t count : {size_t(1), size_t(7), size_t(100003)})
          EXPECT_EQ(runAllReduce(comms, {type, op, inPlace, false}, count), "")
              << reduce::typeName(type) << " op " << int(op) << (inPlace ? " in place" : "") << " count " << count;
  for (ncclDataType_t type : {ncclFloat32, ncclFloat16, ncclFloat64})
    EXPECT_EQ(runAllReduce(comms, {type, ncclSum, false, true}, 1001), "") << "PreMulSum " << reduce::typeName(type);
}

TEST(PeerAccessResults, ReduceScatterAndAllGather) {
  braidtest::LocalComms comms(kRanks);
  ASSERT_TRUE(comms.ok()) << comms.error();
  for (size_t count : {size_t(1), size_t(5), size_t(30011)})
    for (bool inPlace : {false, true}) {
      std::vector<std::vector<int32_t>> in(kRanks), out(kRanks);
      for (int r = 0; r < kRanks; ++r) {
        in[size_t(r)].resize(count * kRanks);
        for (size_t i = 0; i < in[size_t(r)].size(); ++i) in[size_t(r)][i] = int32_t(valueOf(r, i)) + r * 10;
        out[size_t(r)].assign(count, -1);
      }
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      for (int r = 0; r < kRanks; ++r) {
        int32_t* recv = inPlace ? in[size_t(r)].data() + size_t(r) * count : out[size_t(r)].data();
        ASSERT_EQ(ncclReduceScatter(in[size_t(r)].data(), recv, count, ncclInt32, ncclSum, comms[r], nullptr),
                  ncclSuccess);
      }
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
      for (int r = 0; r < kRanks; ++r)
        for (size_t i = 0; i < count; ++i) {
          const size_t e = size_t(r) * count + i;
          int32_t want = 0;
          for (int k = 0; k < kRanks; ++k) want += int32_t(valueOf(k, e)) + k * 10;
          const int32_t got = inPlace ? in[size_t(r)][e] : out[size_t(r)][i];
          ASSERT_EQ(got, want) << "reduce-scatter rank " << r << " element " << i << " count " << count;
        }
      // All-gather: rank r's block is its own.
      std::vector<std::vector<int32_t>> gathered(kRanks, std::vector<int32_t>(count * kRanks, -1));
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      for (int r = 0; r < kRanks; ++r) {
        int32_t* send = gathered[size_t(r)].data() + size_t(r) * count;
        for (size_t i = 0; i < count; ++i) send[i] = int32_t(r * 1000 + int(i % 997));
        const int32_t* from = inPlace ? send : in[size_t(r)].data();
        if (!inPlace)
          for (size_t i = 0; i < count; ++i) in[size_t(r)][i] = send[i];
        ASSERT_EQ(ncclAllGather(from, gathered[size_t(r)].data(), count, ncclInt32, comms[r], nullptr), ncclSuccess);
      }
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
      for (int r = 0; r < kRanks; ++r)
        for (size_t i = 0; i < count * kRanks; ++i)
          ASSERT_EQ(gathered[size_t(r)][i], int32_t((i / count) * 1000 + (i % count) % 997))
              << "all-gather rank " << r << " element " << i << " count " << count;
    }
}

// Ranks whose calls differ never address each other's memory: the FIFO
// schedules run and report the difference.
TEST(PeerAccessResults, DifferentCountsAreAnErrorNotACrash) {
  braidtest::LocalComms comms(kRanks);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<std::vector<float>> buf(kRanks, std::vector<float>(5000, 1.0f));
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(ncclAllReduce(buf[size_t(r)].data(), buf[size_t(r)].data(), r == 3 ? 4000 : 5000, ncclFloat32, ncclSum,
                            comms[r], nullptr),
              ncclSuccess);
  EXPECT_NE(ncclGroupEnd(), ncclSuccess);
  EXPECT_NE(std::string(ncclGetLastError(nullptr)), "");
}

}  // namespace
}  // namespace lanes
}  // namespace braid
