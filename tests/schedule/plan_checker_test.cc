#include <gtest/gtest.h>

#include "plan_checker.h"

namespace braid {
namespace {

const Collective kCollectives[] = {
    Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather, Collective::Broadcast,
    Collective::Reduce,    Collective::AllToAll,      Collective::Gather,    Collective::Scatter,
};

CollShape shape(Collective c, int nranks, size_t count, int root, size_t chunk, int channels) {
  CollShape s;
  s.coll = c;
  s.nranks = nranks;
  s.count = count;
  s.root = root;
  s.chunkElems = chunk;
  s.nchannels = channels;
  return s;
}

TEST(PlanChecker, EveryCollectiveSmallRankCounts) {
  for (Collective c : kCollectives)
    for (int p = 1; p <= 9; ++p)
      for (size_t count : {1, 2, 5, 17, 64})
        for (size_t chunk : {1, 3, 16})
          for (int channels : {1, 2, 3})
            for (int root : {0, p - 1}) {
              std::string err = checkCollective(shape(c, p, count, root, chunk, channels));
              ASSERT_EQ(err, "") << err;
            }
}

TEST(PlanChecker, LargerRankCounts) {
  for (Collective c : kCollectives)
    for (int p : {16, 31, 64})
      for (size_t count : {1, 7, 100}) {
        std::string err = checkCollective(shape(c, p, count, p / 3, 4, 2));
        ASSERT_EQ(err, "") << err;
      }
}

TEST(PlanChecker, TwoSlotFifosDoNotDeadlock) {
  CheckOptions one;
  one.nslots = 2;
  for (Collective c : kCollectives)
    for (int p : {2, 3, 5, 8}) {
      std::string err = checkCollective(shape(c, p, 40, 1 % p, 3, 2), one);
      ASSERT_EQ(err, "") << err;
    }
}

// The checker must reject plans that are wrong in each way it claims to detect.
TEST(PlanChecker, RejectsBrokenPlans) {
  CollShape s = shape(Collective::AllReduce, 4, 20, 0, 2, 1);
  CheckOptions dropStep;
  dropStep.mutate = [](int rank, Plan* p) { if (rank == 2) p->lanes[0].steps.pop_back(); };
  EXPECT_NE(checkCollective(s, dropStep), "");
  CheckOptions doubleCount;
  doubleCount.mutate = [](int rank, Plan* p) {
    for (Step& st : p->lanes[0].steps)
      if (rank == 1 && st.kind == StepKind::RecvCopySend) {
        st.kind = StepKind::RecvReduceSend;
        st.src = {Buffer::Input, st.dst.offset};
        st.srcIsContribution = true;
      }
  };
  EXPECT_NE(checkCollective(s, doubleCount), "");
  CheckOptions wrongPeer;
  wrongPeer.mutate = [](int rank, Plan* p) {
    if (rank == 0) p->lanes[0].steps[0].sendPeer = 2;
  };
  EXPECT_NE(checkCollective(s, wrongPeer), "");
  CheckOptions noFinal;
  noFinal.mutate = [](int, Plan* p) {
    for (Step& st : p->lanes[0].steps) st.final = false;
  };
  EXPECT_NE(checkCollective(s, noFinal), "");
  CheckOptions oneSlot;
  oneSlot.nslots = 1;  // the executor needs two: a step holds a receive and a send slot
  EXPECT_NE(checkCollective(shape(Collective::AllReduce, 2, 40, 0, 3, 1), oneSlot), "");
}

}  // namespace
}  // namespace braid
