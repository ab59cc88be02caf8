// Ring and tree positions that keep each host's ranks together.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "schedule/generate.h"
#include "schedule/rank_order.h"

namespace braid {
namespace {

TEST(RankOrder, HostByHostNumberingIsTheIdentity) {
  EXPECT_TRUE(schedule::hostContiguousOrder({7, 7, 9, 9, 4}).identity());
  EXPECT_TRUE(schedule::hostContiguousOrder({}).identity());
  EXPECT_TRUE(schedule::hostContiguousOrder({1}).identity());
}

TEST(RankOrder, InterleavedHostsBecomeContiguous) {
  const schedule::RankOrder o = schedule::hostContiguousOrder({5, 8, 5, 8, 5});
  ASSERT_FALSE(o.identity());
  EXPECT_EQ(o.rankAt, (std::vector<int>{0, 2, 4, 1, 3}));
  for (int r = 0; r < 5; ++r) EXPECT_EQ(o.rankAt[o.positionOf[r]], r);
}

TEST(RankOrder, HostsKeepTheOrderOfTheirFirstRank) {
  const schedule::RankOrder o = schedule::hostContiguousOrder({3, 1, 2, 1, 3, 2});
  EXPECT_EQ(o.rankAt, (std::vector<int>{0, 4, 1, 3, 2, 5}));
}

TEST(RankOrder, RingCrossesEachHostBoundaryOnce) {
  const std::vector<uint64_t> hosts = {0, 1, 2, 0, 1, 2, 0, 1, 2};
  EXPECT_EQ(crossHostRingLinks(schedule::RankOrder{}, hosts), 9);
  EXPECT_EQ(crossHostRingLinks(schedule::hostContiguousOrder(hosts), hosts), 3);
}

// The generated ring itself, not only the order: over 2 hosts x 2 ranks
// numbered alternately, each rank sends to one peer and only two of the four
// links leave a host.
TEST(RankOrder, GeneratedRingFollowsTheHosts) {
  const std::vector<uint64_t> hosts = {0, 1, 0, 1};
  const schedule::RankOrder order = schedule::hostContiguousOrder(hosts);
  int crossing = 0;
  for (int r = 0; r < 4; ++r) {
    schedule::CollShape s;
    s.coll = schedule::Collective::AllReduce;
    s.algorithm = schedule::Algorithm::Ring;
    s.rank = r;
    s.nranks = 4;
    s.count = 64;
    s.chunkElems = 4;
    s.order = &order;
    std::set<int> sendsTo;
    for (const schedule::Lane& lane : generatePlan(s).lanes)
      for (const schedule::Step& st : lane.steps)
        if (stepSends(st.kind)) sendsTo.insert(st.sendPeer);
    ASSERT_EQ(sendsTo.size(), 1u) << "rank " << r;
    crossing += hosts[*sendsTo.begin()] != hosts[r];
  }
  EXPECT_EQ(crossing, 2);
}

}  // namespace
}  // namespace braid
