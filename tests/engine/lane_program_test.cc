// The engine's lane program builder (src/engine/lanes/lane_program.h): how
// a group's plans become lanes. Pure code: plans from generatePlan, no FIFOs.
#include <gtest/gtest.h>

#include <set>

#include "engine/lanes/lane_program.h"
#include "reduce/host_reduce.h"
#include "schedule/generate.h"

namespace {

using braid::schedule::Algorithm;
using braid::schedule::Collective;
using braid::executor::ExecStep;
using braid::executor::Protocol;
using braid::lanes::LaneLimits;
using braid::lanes::LaneOp;
using braid::lanes::LaneProgram;
using braid::lanes::PortKey;

braid::schedule::Plan planOf(Collective coll, Algorithm algo, int rank, int nranks, size_t count, int nchannels, int root = 0) {
  braid::schedule::CollShape s;
  s.coll = coll;
  s.algorithm = algo;
  s.rank = rank;
  s.nranks = nranks;
  s.count = count;
  s.root = root;
  s.chunkElems = 1000;
  s.nchannels = nchannels;
  return braid::schedule::generatePlan(s);
}

// LL below 4 KiB, as a small alpha/beta would make the planner choose.
LaneOp opOf(ncclDataType_t type, size_t count) {
  return LaneOp{type, count * braid::reduce::typeSize(type) < 4096 ? Protocol::LL : Protocol::Bulk};
}

size_t channelLanesWithSteps(const braid::schedule::Plan& p) {
  size_t n = 0;
  for (const braid::schedule::Lane& l : p.lanes) n += l.key.kind == braid::schedule::LaneKind::Channel && !l.steps.empty();
  return n;
}

// A large ring allreduce on two channels, a small tree allreduce, a send: the
// second operation's part of each channel lane waits for all of the first's
// lanes; the send's lane waits for nothing.
TEST(LaneProgram, LaterOperationsWaitForEveryLaneOfTheOneBefore) {
  const int P = 4, rank = 1;
  const std::vector<braid::schedule::Plan> plans = {planOf(Collective::AllReduce, Algorithm::Ring, rank, P, 100000, 2),
                                          planOf(Collective::AllReduce, Algorithm::Tree, rank, P, 100, 1),
                                          planOf(Collective::Send, Algorithm::Direct, rank, P, 10, 1, 2)};
  const std::vector<LaneOp> ops = {opOf(ncclFloat32, 100000), opOf(ncclFloat32, 100), opOf(ncclFloat32, 10)};
  LaneProgram prog;
  const braid::Result r = buildLaneProgram(ops, plans, LaneLimits{}, &prog);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(prog.nstages, 2u);
  const uint64_t firstLanes = channelLanesWithSteps(plans[0]);
  ASSERT_EQ(firstLanes, 2u);
  int waits = 0, done0 = 0, done1 = 0;
  for (const auto& lane : prog.lanes) {
    uint32_t lastOp = lane.bound.steps.front().op;
    for (size_t i = 0; i < lane.bound.steps.size(); ++i) {
      const ExecStep& s = lane.bound.steps[i];
      const bool firstOfPart = i == 0 || s.op != lane.bound.steps[i - 1].op;
      const bool lastOfPart = i + 1 == lane.bound.steps.size() || lane.bound.steps[i + 1].op != s.op;
      EXPECT_GE(s.op, lastOp) << "operations out of call order in a lane";
      lastOp = s.op;
      if (s.op == 2) {
        EXPECT_EQ(s.waitStage, -1);
        EXPECT_EQ(s.doneStage, -1);
        continue;
      }
      if (s.op == 1 && firstOfPart) {
        EXPECT_EQ(s.waitStage, 0);
        EXPECT_EQ(s.waitCount, firstLanes);
        ++waits;
      } else {
        EXPECT_EQ(s.waitStage, -1) << "step " << i << " of op " << s.op;
      }
      if (lastOfPart) {
        EXPECT_EQ(s.doneStage, int32_t(s.op));
        (s.op == 0 ? done0 : done1)++;
      } else {
        EXPECT_EQ(s.doneStage, -1);
      }
    }
  }
  EXPECT_EQ(waits, int(channelLanesWithSteps(plans[1])));
  EXPECT_EQ(done0, int(firstLanes));
  EXPECT_EQ(done1, int(channelLanesWithSteps(plans[1])));
}

// Small operations use LL, large ones bulk, each over FIFOs of its own.
TEST(LaneProgram, ProtocolFollowsTheOperationAndKeysItsFifos) {
  const int P = 3, rank = 0;
  const std::vector<braid::schedule::Plan> plans = {planOf(Collective::AllReduce, Algorithm::Ring, rank, P, 10, 1),
                                          planOf(Collective::AllReduce, Algorithm::Ring, rank, P, 100000, 1)};
  const std::vector<LaneOp> ops = {opOf(ncclInt32, 10), opOf(ncclInt32, 100000)};
  LaneProgram prog;
  ASSERT_TRUE(buildLaneProgram(ops, plans, LaneLimits{}, &prog).ok());
  ASSERT_EQ(prog.lanes.size(), 1u);
  const auto& lane = prog.lanes[0];
  for (const ExecStep& s : lane.bound.steps) {
    if (s.sendPort >= 0) {
      EXPECT_EQ(lane.bound.sendProtocols[size_t(s.sendPort)] == Protocol::LL, s.op == 0);
    }
    if (s.recvPort >= 0) {
      EXPECT_EQ(lane.bound.recvProtocols[size_t(s.recvPort)] == Protocol::LL, s.op == 0);
    }
  }
  EXPECT_TRUE(prog.lanes[0].anyLL);
  std::set<PortKey> keys;
  for (const PortKey& k : portsOf(prog)) keys.insert(k);
  // Ring: send to rank 1 and receive from rank 2, once per protocol.
  EXPECT_EQ(keys.size(), 4u);
  for (Protocol p : {Protocol::LL, Protocol::Bulk}) {
    EXPECT_EQ(keys.count(PortKey{1, 0, true, p}), 1u);
    EXPECT_EQ(keys.count(PortKey{2, 0, false, p}), 1u);
  }
}

// Every runner dispatches per step (typed_step.h), so a lane may carry
// operations of several datatypes.
TEST(LaneProgram, MixedDatatypesInALaneAreAccepted) {
  const std::vector<braid::schedule::Plan> plans = {planOf(Collective::AllReduce, Algorithm::Ring, 0, 2, 100, 1),
                                          planOf(Collective::AllReduce, Algorithm::Ring, 0, 2, 100, 1)};
  const std::vector<LaneOp> ops = {opOf(ncclFloat32, 100), opOf(ncclInt8, 100)};
  LaneProgram prog;
  ASSERT_TRUE(buildLaneProgram(ops, plans, LaneLimits{}, &prog).ok());
  ASSERT_FALSE(prog.lanes.empty());
  EXPECT_EQ(prog.lanes.front().type, ncclFloat32);
}

TEST(LaneProgram, AStepLargerThanItsSlotIsAnError) {
  const std::vector<braid::schedule::Plan> plans = {planOf(Collective::AllReduce, Algorithm::Ring, 0, 2, 100000, 1)};
  LaneLimits small;
  small.channelPayloadBytes = 1024;  // the plan's chunks are 1000 floats
  LaneProgram prog;
  const braid::Result r = buildLaneProgram({opOf(ncclFloat32, 100000)}, plans, small, &prog);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.message().find("more than a slot"), std::string::npos) << r.message();
}

}  // namespace
