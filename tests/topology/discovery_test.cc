// Topology discovery from sysfs fixture trees: a full two-socket machine, an
// empty one, and files a broken or unusual kernel might write.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sysfs_fixture.h"
#include "topology/sysfs.h"
#include "topology/topology.h"

namespace braid {
namespace topology {
namespace {

using testing::SysfsFixture;

Topology discover(const SysfsFixture& fx) {
  Topology t;
  Result r = discoverTopology(fx.root(), &t);
  EXPECT_TRUE(r.ok()) << r.message();
  return t;
}

const PciDevice* findPci(const Topology& t, const std::string& busId) {
  for (const PciDevice& d : t.pci)
    if (d.busId == busId) return &d;
  return nullptr;
}

const NetDevice* findIf(const Topology& t, const std::string& name) {
  for (const NetDevice& n : t.interfaces)
    if (n.name == name) return &n;
  return nullptr;
}

TEST(SysfsParse, CpuLists) {
  std::vector<int> v;
  ASSERT_TRUE(parseCpuList("0-3,8,10-11", &v));
  EXPECT_EQ(v, (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  ASSERT_TRUE(parseCpuList("5\n", &v));
  EXPECT_EQ(v, (std::vector<int>{5}));
  ASSERT_TRUE(parseCpuList("", &v));
  EXPECT_TRUE(v.empty());
  EXPECT_FALSE(parseCpuList("3-1", &v));
  EXPECT_FALSE(parseCpuList("a-b", &v));
  EXPECT_FALSE(parseCpuList("1,,2", &v));
  EXPECT_FALSE(parseCpuList("-1", &v));
  EXPECT_FALSE(parseCpuList("0-999999999", &v));
  EXPECT_EQ(formatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(formatCpuList({}), "");
  EXPECT_EQ(formatCpuList({7}), "7");
}

TEST(SysfsParse, BusIdsAndNumbers) {
  EXPECT_TRUE(isPciBusId("0000:3b:00.0"));
  EXPECT_FALSE(isPciBusId("pci0000:00"));
  EXPECT_FALSE(isPciBusId("0000:3b:00.g"));
  int n = -1;
  EXPECT_TRUE(numberAfter("node12", "node", &n));
  EXPECT_EQ(n, 12);
  EXPECT_FALSE(numberAfter("node", "node", &n));
  EXPECT_FALSE(numberAfter("nodes1", "node", &n));
  std::vector<int> d;
  ASSERT_TRUE(parseIntList("10 21 31", &d));
  EXPECT_EQ(d, (std::vector<int>{10, 21, 31}));
  EXPECT_FALSE(parseIntList("10 x", &d));
}

TEST(Discovery, TwoSocketMachine) {
  SysfsFixture fx;
  testing::buildTwoSocketMachine(&fx);
  Topology t = discover(fx);

  EXPECT_EQ(t.onlineCpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  ASSERT_EQ(t.cpus.size(), 8u);
  EXPECT_EQ(t.packageCount(), 2);
  EXPECT_EQ(t.coreCount(), 4);  // two hardware threads per core
  EXPECT_EQ(t.cpus[5].package, 1);
  EXPECT_EQ(t.cpus[5].core, 1);
  EXPECT_EQ(t.cpus[2].numaNode, 0);
  EXPECT_EQ(t.cpus[6].numaNode, 1);

  ASSERT_EQ(t.numaNodes.size(), 2u);  // "online", "has_cpu" are not nodes
  EXPECT_EQ(t.numaNodes[1].id, 1);
  EXPECT_EQ(t.numaNodes[1].cpus, (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(t.numaNodes[0].distances, (std::vector<int>{10, 21}));

  // Bridges, the host bridge and the non-NVIDIA VGA are left out.
  EXPECT_EQ(t.pci.size(), 5u);
  std::vector<const PciDevice*> gpus = t.gpus();
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0]->busId, "0000:3b:00.0");
  EXPECT_EQ(gpus[0]->numaNode, 0);
  EXPECT_EQ(gpus[0]->path, "0000:00:01.0/0000:3b:00.0");
  EXPECT_EQ(gpus[1]->busId, "0000:af:00.0");
  EXPECT_EQ(gpus[1]->numaNode, 1);
  EXPECT_EQ(gpus[1]->vendor, 0x10deu);
  EXPECT_EQ(gpus[1]->classCode, 0x030000u);
  const PciDevice* hca = findPci(t, "0000:3c:00.0");
  ASSERT_NE(hca, nullptr);
  EXPECT_EQ(hca->kind, PciKind::kInfiniBand);
  const PciDevice* eth = findPci(t, "0000:00:03.0");
  ASSERT_NE(eth, nullptr);
  EXPECT_EQ(eth->kind, PciKind::kNic);
  EXPECT_EQ(eth->path, "0000:00:03.0");
  EXPECT_EQ(findPci(t, "0000:80:02.0"), nullptr);

  ASSERT_EQ(t.interfaces.size(), 4u);
  const NetDevice* eth0 = findIf(t, "eth0");
  ASSERT_NE(eth0, nullptr);
  EXPECT_EQ(eth0->pciBusId, "0000:00:03.0");
  EXPECT_EQ(eth0->speedMbps, 25000);
  EXPECT_TRUE(eth0->up);
  const NetDevice* ib0 = findIf(t, "ib0");
  ASSERT_NE(ib0, nullptr);
  EXPECT_EQ(ib0->pciBusId, "0000:3c:00.0");
  const NetDevice* eth1 = findIf(t, "eth1");
  ASSERT_NE(eth1, nullptr);
  EXPECT_FALSE(eth1->up);
  EXPECT_EQ(eth1->speedMbps, -1);
  const NetDevice* lo = findIf(t, "lo");
  ASSERT_NE(lo, nullptr);
  EXPECT_TRUE(lo->up);
  EXPECT_TRUE(lo->pciBusId.empty());
  EXPECT_EQ(lo->speedMbps, -1);

  ASSERT_EQ(t.ib.size(), 2u);
  EXPECT_EQ(t.ib[0].name, "mlx5_0");
  EXPECT_EQ(t.ib[0].pciBusId, "0000:3c:00.0");
  ASSERT_EQ(t.ib[0].ports.size(), 1u);
  EXPECT_EQ(t.ib[0].ports[0].linkLayer, "InfiniBand");
  EXPECT_EQ(t.ib[0].ports[0].rate, "100 Gb/sec (4X EDR)");
  EXPECT_TRUE(t.ib[0].usable());
  EXPECT_FALSE(t.ib[1].usable());
  EXPECT_TRUE(t.hasUsableIb());
  EXPECT_TRUE(t.warnings.empty()) << t.warnings[0];
}

TEST(Discovery, OnlyDownIbPortsAreNotUsable) {
  SysfsFixture fx;
  fx.write("class/infiniband/mlx5_0/ports/1/state", "2: INIT");
  fx.write("class/infiniband/mlx5_0/ports/2/state", "1: DOWN");
  Topology t = discover(fx);
  ASSERT_EQ(t.ib.size(), 1u);
  EXPECT_EQ(t.ib[0].ports.size(), 2u);
  EXPECT_FALSE(t.hasUsableIb());
}

TEST(Discovery, MachineWithNothing) {
  SysfsFixture fx;
  Topology t = discover(fx);
  EXPECT_TRUE(t.onlineCpus.empty());
  EXPECT_TRUE(t.cpus.empty());
  EXPECT_TRUE(t.numaNodes.empty());
  EXPECT_TRUE(t.pci.empty());
  EXPECT_TRUE(t.interfaces.empty());
  EXPECT_TRUE(t.ib.empty());
  EXPECT_TRUE(t.gpus().empty());
  EXPECT_FALSE(t.hasUsableIb());
  EXPECT_EQ(t.packageCount(), 0);
}

TEST(Discovery, MissingRootFails) {
  Topology t;
  Result r = discoverTopology("/nonexistent/braid-sysfs", &t);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.message().find("/nonexistent/braid-sysfs"), std::string::npos);
}

TEST(Discovery, MalformedFilesAreSkippedWithWarnings) {
  SysfsFixture fx;
  fx.write("devices/system/cpu/online", "zero-one");
  fx.write("devices/system/cpu/cpu0/topology/physical_package_id", "x");
  fx.write("devices/system/cpu/cpu1/topology/physical_package_id", "0");
  fx.write("devices/system/cpu/cpu1/topology/core_id", "1");
  fx.mkdir("devices/system/cpu/cpufreq");
  fx.write("devices/system/node/node0/cpulist", "3-1");
  fx.write("devices/system/node/node0/distance", "10 20 30");
  fx.write("devices/system/node/node1/cpulist", "0-1");
  fx.write("devices/system/node/node1/distance", "20 10");
  fx.write("bus/pci/devices/0000:01:00.0/vendor", "nvidia");
  fx.write("bus/pci/devices/0000:01:00.0/class", "0x030200");
  fx.write("bus/pci/devices/0000:02:00.0/vendor", "0x10de");
  fx.write("bus/pci/devices/0000:02:00.0/class", "0x030200");
  fx.write("bus/pci/devices/0000:02:00.0/numa_node", "-1");
  fx.write("class/net/eth0/speed", "fast");
  fx.write("class/net/eth0/operstate", "up");
  fx.write("class/infiniband/mlx5_0/ports/1/link_layer", "Ethernet");
  fx.mkdir("class/infiniband/mlx5_0/ports/notaport");
  Topology t = discover(fx);

  // Unparseable online list: the cpuN directories are counted instead.
  EXPECT_EQ(t.onlineCpus, (std::vector<int>{0, 1}));
  ASSERT_EQ(t.cpus.size(), 2u);
  EXPECT_EQ(t.cpus[0].package, -1);
  EXPECT_EQ(t.cpus[1].core, 1);
  ASSERT_EQ(t.numaNodes.size(), 2u);
  EXPECT_TRUE(t.numaNodes[0].cpus.empty());
  EXPECT_TRUE(t.numaNodes[0].distances.empty());  // three distances for two nodes
  EXPECT_EQ(t.numaNodes[1].distances, (std::vector<int>{20, 10}));
  EXPECT_EQ(t.cpus[0].numaNode, 1);
  // The device with a bad vendor is dropped; the other has no known NUMA node and
  // no PCI chain (not a link), so its path is its own address.
  ASSERT_EQ(t.pci.size(), 1u);
  EXPECT_EQ(t.pci[0].busId, "0000:02:00.0");
  EXPECT_EQ(t.pci[0].numaNode, -1);
  EXPECT_EQ(t.pci[0].path, "0000:02:00.0");
  ASSERT_EQ(t.interfaces.size(), 1u);
  EXPECT_EQ(t.interfaces[0].speedMbps, -1);
  EXPECT_FALSE(t.interfaces[0].up);  // no flags file
  ASSERT_EQ(t.ib.size(), 1u);
  ASSERT_EQ(t.ib[0].ports.size(), 1u);
  EXPECT_FALSE(t.ib[0].usable());

  auto warned = [&](const std::string& what) {
    for (const std::string& w : t.warnings)
      if (w.find(what) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(warned("cpu/online"));
  EXPECT_TRUE(warned("node0/cpulist"));
  EXPECT_TRUE(warned("3 distances for 2 nodes"));
  EXPECT_TRUE(warned("0000:01:00.0"));
  EXPECT_TRUE(warned("eth0/flags"));
  EXPECT_TRUE(warned("ports/1/state"));
}

}  // namespace
}  // namespace topology
}  // namespace braid
