// The transport braid uses between two ranks, from their placement, checked
// against a table written from the rules of the transports (inproc: one
// process; shm: one host and one /dev/shm, two processes; tcp: anything), plus
// the paths braid does not have yet (P2P between GPUs of one host, IB).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "sysfs_fixture.h"
#include "topology/pair_class.h"
#include "topology/placement.h"
#include "transports/registry/registry.h"

namespace braid {
namespace topology {
namespace {

// `process` numbers a process within its host: a real PeerInfo::processId is
// hashed with the host hash, so processes of two hosts never share one.
RankPlacement at(uint64_t host, uint64_t process, const std::string& gpu = "", bool ib = false) {
  RankPlacement p;
  p.hostHash = host;
  p.shmDomain = host;
  p.processId = host * 1000 + process;
  p.gpuBusId = gpu;
  p.ibUsable = ib;
  return p;
}

struct Row {
  const char* what;
  RankPlacement a, b;
  const char* transport;
  PairPath path;
};

TEST(PairClass, Table) {
  RankPlacement otherShm = at(1, 11);
  otherShm.shmDomain = 99;  // same host, another ipc namespace or /dev/shm
  const Row rows[] = {
      {"one process", at(1, 10), at(1, 10), "inproc", PairPath::kInproc},
      {"one process, GPUs", at(1, 10, "0000:3b:00.0"), at(1, 10, "0000:af:00.0"), "inproc",
       PairPath::kInproc},
      {"one host", at(1, 10), at(1, 11), "shm", PairPath::kShm},
      {"one host, one GPU", at(1, 10, "0000:3b:00.0"), at(1, 11), "shm", PairPath::kShm},
      {"one host, two GPUs", at(1, 10, "0000:3b:00.0"), at(1, 11, "0000:af:00.0"), "shm",
       PairPath::kP2p},
      {"one host, two /dev/shm", at(1, 10), otherShm, "tcp", PairPath::kTcp},
      {"one host, IB", at(1, 10, "", true), at(1, 11, "", true), "shm", PairPath::kShm},
      {"two hosts", at(1, 10), at(2, 10), "tcp", PairPath::kTcp},
      {"two hosts, IB on both", at(1, 10, "", true), at(2, 20, "", true), "tcp", PairPath::kIb},
      {"two hosts, IB on one", at(1, 10, "", true), at(2, 20), "tcp", PairPath::kTcp},
  };
  const auto transports = registry::makeTransports();
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    PairTransport p = classifyPair(row.a, row.b, transports);
    EXPECT_EQ(p.transport, row.transport);
    EXPECT_EQ(p.path, row.path);
    PairTransport back = classifyPair(row.b, row.a, transports);
    EXPECT_EQ(back.transport, p.transport) << "not symmetric";
    EXPECT_EQ(back.path, p.path) << "not symmetric";
  }
}

TEST(PairClass, Descriptions) {
  const auto transports = registry::makeTransports();
  PairTransport shm = classifyPair(at(1, 10), at(1, 11), transports);
  EXPECT_TRUE(shm.implemented());
  EXPECT_EQ(shm.describe(), "shm");
  EXPECT_EQ(shm.shortName(), "shm");
  PairTransport p2p = classifyPair(at(1, 10, "a"), at(1, 11, "b"), transports);
  EXPECT_FALSE(p2p.implemented());
  EXPECT_EQ(p2p.describe(), "p2p (not implemented yet; shm today)");
  EXPECT_EQ(p2p.shortName(), "p2p*");
  PairTransport ib = classifyPair(at(1, 10, "", true), at(2, 10, "", true), transports);
  EXPECT_EQ(ib.describe(), "ib (not implemented yet; tcp today)");
}

TEST(PairClass, ShmDisableIsHonoured) {
  // The shm transport reads NCCL_SHM_DISABLE when it is made, as in a communicator.
  setenv("NCCL_SHM_DISABLE", "1", 1);
  const auto transports = registry::makeTransports();
  unsetenv("NCCL_SHM_DISABLE");
  EXPECT_EQ(classifyPair(at(1, 10), at(1, 11), transports).transport, "tcp");
  EXPECT_EQ(classifyPair(at(1, 10), at(1, 10), transports).transport, "inproc");
}

TEST(PairClass, NoTransportsMeansNone) {
  std::vector<std::unique_ptr<transports::Transport>> none;
  PairTransport p = classifyPair(at(1, 10), at(1, 11), none);
  EXPECT_TRUE(p.transport.empty());
  EXPECT_EQ(p.path, PairPath::kNone);
  EXPECT_EQ(p.shortName(), "-");
}

TEST(Placement, RanksOverHostsFollowGpusAndNuma) {
  testing::SysfsFixture fx;
  testing::buildTwoSocketMachine(&fx);
  Topology machine;
  ASSERT_TRUE(discoverTopology(fx.root(), &machine).ok());
  PlacementOptions opt;
  opt.nranks = 6;
  opt.hosts = 2;
  std::vector<RankPlacement> ranks = simulatePlacements(machine, opt);
  ASSERT_EQ(ranks.size(), 6u);
  const int hosts[] = {0, 0, 0, 1, 1, 1};
  for (int r = 0; r < 6; ++r) EXPECT_EQ(hostOfRank(r, opt), hosts[r]) << r;
  EXPECT_EQ(ranks[0].gpuBusId, "0000:3b:00.0");
  EXPECT_EQ(ranks[1].gpuBusId, "0000:af:00.0");
  EXPECT_EQ(ranks[2].gpuBusId, "0000:3b:00.0");
  EXPECT_EQ(ranks[3].gpuBusId, "0000:3b:00.0");  // first rank of host 1
  EXPECT_EQ(ranks[1].numaNode, 1);
  EXPECT_TRUE(ranks[4].ibUsable);

  const auto transports = registry::makeTransports();
  EXPECT_EQ(classifyPair(ranks[0], ranks[0], transports).path, PairPath::kInproc);
  EXPECT_EQ(classifyPair(ranks[0], ranks[1], transports).path, PairPath::kP2p);
  EXPECT_EQ(classifyPair(ranks[2], ranks[3], transports).path, PairPath::kIb);

  opt.threadRanks = true;
  ranks = simulatePlacements(machine, opt);
  EXPECT_EQ(classifyPair(ranks[0], ranks[2], transports).transport, "inproc");
  EXPECT_EQ(classifyPair(ranks[2], ranks[3], transports).transport, "tcp");
}

TEST(Placement, MachineWithoutGpusSpreadsOverNumaNodes) {
  testing::SysfsFixture fx;
  fx.write("devices/system/node/node0/cpulist", "0");
  fx.write("devices/system/node/node1/cpulist", "1");
  Topology machine;
  ASSERT_TRUE(discoverTopology(fx.root(), &machine).ok());
  PlacementOptions opt;
  opt.nranks = 3;
  std::vector<RankPlacement> ranks = simulatePlacements(machine, opt);
  EXPECT_EQ(ranks[0].numaNode, 0);
  EXPECT_EQ(ranks[1].numaNode, 1);
  EXPECT_EQ(ranks[2].numaNode, 0);
  EXPECT_TRUE(ranks[1].gpuBusId.empty());
  const auto transports = registry::makeTransports();
  EXPECT_EQ(classifyPair(ranks[0], ranks[1], transports).describe(), "shm");
}

}  // namespace
}  // namespace topology
}  // namespace braid
