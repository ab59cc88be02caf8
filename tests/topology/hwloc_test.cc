// The hwloc backend and the choice between backends: on this machine hwloc and
// sysfs must describe the same CPUs, NUMA nodes, GPUs and NICs; on an hwloc XML
// twin of the sysfs two-socket fixture, exactly the same Topology; libhwloc
// loaded at run time, and sysfs when it cannot be. The hwloc tests skip,
// saying why, in builds without hwloc.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "sysfs_fixture.h"
#include "topology/topology.h"
#ifdef BRAID_HAVE_HWLOC
#include "topology/hwloc_discovery.h"
#include "topology/hwloc_loader.h"
#endif

namespace braid {
namespace topology {
namespace {

using testing::SysfsFixture;

#define SKIP_WITHOUT_HWLOC()                                                      \
  if (!hwlocBuiltIn())                                                            \
  GTEST_SKIP() << "hwloc is not built in (configure with libhwloc-dev installed, " \
                  "BRAID_HWLOC=AUTO or ON)"

// Tests that need libhwloc itself, which a build with hwloc's headers may lack
// at run time.
#define SKIP_WITHOUT_LIBHWLOC()                                  \
  SKIP_WITHOUT_HWLOC();                                          \
  if (std::string why; !hwlocAvailable(&why))                    \
  GTEST_SKIP() << "libhwloc cannot be used here: " << why

// Sets BRAID_TOPO for one test and puts back what was there.
class ScopedTopoEnv {
 public:
  explicit ScopedTopoEnv(const char* value) {
    const char* old = getenv("BRAID_TOPO");
    hadOld_ = old != nullptr;
    if (hadOld_) old_ = old;
    if (value)
      setenv("BRAID_TOPO", value, 1);
    else
      unsetenv("BRAID_TOPO");
  }
  ~ScopedTopoEnv() {
    if (hadOld_)
      setenv("BRAID_TOPO", old_.c_str(), 1);
    else
      unsetenv("BRAID_TOPO");
  }
  ScopedTopoEnv(const ScopedTopoEnv&) = delete;
  ScopedTopoEnv& operator=(const ScopedTopoEnv&) = delete;

 private:
  bool hadOld_ = false;
  std::string old_;
};

bool warned(const Topology& t, const std::string& what) {
  for (const std::string& w : t.warnings)
    if (w.find(what) != std::string::npos) return true;
  return false;
}

Topology machine(const std::string& sysRoot = "/sys") {
  Topology t;
  Result r = discoverMachine(sysRoot, &t);
  EXPECT_TRUE(r.ok()) << r.message();
  return t;
}

// Everything both backends know. Device NUMA nodes are compared where both
// know one, or always when `deviceNuma` (a single-node machine may leave the
// kernel's numa_node at -1 while hwloc finds the one node, or the reverse).
void expectSameMachine(const Topology& s, const Topology& h, bool deviceNuma) {
  EXPECT_EQ(s.onlineCpus, h.onlineCpus);
  ASSERT_EQ(s.cpus.size(), h.cpus.size());
  for (size_t i = 0; i < s.cpus.size(); ++i) {
    SCOPED_TRACE("cpu " + std::to_string(s.cpus[i].id));
    EXPECT_EQ(s.cpus[i].id, h.cpus[i].id);
    EXPECT_EQ(s.cpus[i].package, h.cpus[i].package);
    EXPECT_EQ(s.cpus[i].core, h.cpus[i].core);
    EXPECT_EQ(s.cpus[i].numaNode, h.cpus[i].numaNode);
  }
  EXPECT_EQ(s.packageCount(), h.packageCount());
  EXPECT_EQ(s.coreCount(), h.coreCount());
  ASSERT_EQ(s.numaNodes.size(), h.numaNodes.size());
  for (size_t i = 0; i < s.numaNodes.size(); ++i) {
    SCOPED_TRACE("numa node " + std::to_string(s.numaNodes[i].id));
    EXPECT_EQ(s.numaNodes[i].id, h.numaNodes[i].id);
    EXPECT_EQ(s.numaNodes[i].cpus, h.numaNodes[i].cpus);
    EXPECT_EQ(s.numaNodes[i].distances, h.numaNodes[i].distances);
  }
  ASSERT_EQ(s.pci.size(), h.pci.size());
  for (size_t i = 0; i < s.pci.size(); ++i) {
    const PciDevice& a = s.pci[i];
    const PciDevice& b = h.pci[i];
    SCOPED_TRACE("pci " + a.busId);
    EXPECT_EQ(a.busId, b.busId);
    EXPECT_EQ(a.kind, b.kind);
    EXPECT_EQ(a.vendor, b.vendor);
    EXPECT_EQ(a.device, b.device);
    EXPECT_EQ(a.classCode, b.classCode);
    EXPECT_EQ(a.path, b.path);
    if (deviceNuma || (a.numaNode >= 0 && b.numaNode >= 0)) {
      EXPECT_EQ(a.numaNode, b.numaNode);
    }
  }
  EXPECT_EQ(s.gpus().size(), h.gpus().size());
  ASSERT_EQ(s.interfaces.size(), h.interfaces.size());
  for (size_t i = 0; i < s.interfaces.size(); ++i) {
    EXPECT_EQ(s.interfaces[i].name, h.interfaces[i].name);
    EXPECT_EQ(s.interfaces[i].pciBusId, h.interfaces[i].pciBusId) << s.interfaces[i].name;
  }
  ASSERT_EQ(s.ib.size(), h.ib.size());
  for (size_t i = 0; i < s.ib.size(); ++i) {
    EXPECT_EQ(s.ib[i].name, h.ib[i].name);
    EXPECT_EQ(s.ib[i].pciBusId, h.ib[i].pciBusId) << s.ib[i].name;
  }
}

TEST(TopoBackend, ChoiceFromBraidTopo) {
  std::string warning;
  const Backend preferred = hwlocAvailable() ? Backend::kHwloc : Backend::kSysfs;
  EXPECT_EQ(chooseBackend("", &warning), preferred);
  EXPECT_EQ(warning, "");
  EXPECT_EQ(chooseBackend("sysfs", &warning), Backend::kSysfs);
  EXPECT_EQ(warning, "");
  if (hwlocAvailable()) {
    EXPECT_EQ(chooseBackend("hwloc", &warning), Backend::kHwloc);
    EXPECT_EQ(warning, "");
  } else {
    EXPECT_EQ(chooseBackend("hwloc", &warning), Backend::kSysfs);
    EXPECT_NE(warning.find("BRAID_TOPO=hwloc, but"), std::string::npos) << warning;
  }
  EXPECT_EQ(chooseBackend("lstopo", &warning), preferred);
  EXPECT_NE(warning.find("BRAID_TOPO=lstopo"), std::string::npos) << warning;
  EXPECT_STREQ(backendName(Backend::kSysfs), "sysfs");
  EXPECT_STREQ(backendName(Backend::kHwloc), "hwloc");
}

TEST(TopoBackend, DefaultIsHwlocWhenAvailable) {
  ScopedTopoEnv env(nullptr);
  Topology t = machine();
  EXPECT_EQ(t.backend, hwlocAvailable() ? Backend::kHwloc : Backend::kSysfs);
  EXPECT_EQ(t.backendVersion.empty(), !hwlocAvailable());
}

TEST(TopoBackend, EnvForcesSysfs) {
  ScopedTopoEnv env("sysfs");
  Topology t = machine();
  EXPECT_EQ(t.backend, Backend::kSysfs);
  EXPECT_TRUE(t.backendVersion.empty());
  EXPECT_FALSE(warned(t, "BRAID_TOPO"));
  EXPECT_FALSE(t.cpus.empty());
}

TEST(TopoBackend, EnvForcesHwlocOrWarns) {
  ScopedTopoEnv env("hwloc");
  Topology t = machine();
  if (hwlocAvailable()) {
    EXPECT_EQ(t.backend, Backend::kHwloc);
    EXPECT_FALSE(warned(t, "BRAID_TOPO"));
  } else if (hwlocBuiltIn()) {
    EXPECT_EQ(t.backend, Backend::kSysfs);
    EXPECT_TRUE(warned(t, "BRAID_TOPO=hwloc, but cannot load"));
  } else {
    EXPECT_EQ(t.backend, Backend::kSysfs);
    EXPECT_TRUE(warned(t, "BRAID_TOPO=hwloc, but this build of braid has no hwloc"));
  }
  EXPECT_FALSE(t.cpus.empty());
}

TEST(TopoBackend, FixtureRootIsReadWithSysfs) {
  SysfsFixture fx;
  testing::buildTwoSocketMachine(&fx);
  {
    ScopedTopoEnv env(nullptr);
    Topology t = machine(fx.root());
    EXPECT_EQ(t.backend, Backend::kSysfs);
    EXPECT_EQ(t.cpus.size(), 8u);  // the fixture, not this machine
    EXPECT_TRUE(t.warnings.empty()) << t.warnings[0];
  }
  ScopedTopoEnv env("hwloc");
  Topology t = machine(fx.root());
  EXPECT_EQ(t.backend, Backend::kSysfs);
  EXPECT_EQ(t.cpus.size(), 8u);
  EXPECT_TRUE(warned(t, "BRAID_TOPO=hwloc"));
}

TEST(TopoBackend, MissingRootFailsWithEitherBackend) {
  for (const char* backend : {"sysfs", "hwloc"}) {
    ScopedTopoEnv env(backend);
    Topology t;
    EXPECT_FALSE(discoverMachine("/nonexistent/braid-sysfs", &t).ok()) << backend;
  }
}

TEST(HwlocDiscovery, AgreesWithSysfsOnThisMachine) {
  SKIP_WITHOUT_LIBHWLOC();
  Topology s, h;
  {
    ScopedTopoEnv env("sysfs");
    s = machine();
  }
  {
    ScopedTopoEnv env("hwloc");
    h = machine();
  }
  ASSERT_EQ(s.backend, Backend::kSysfs);
  ASSERT_EQ(h.backend, Backend::kHwloc);
  EXPECT_FALSE(h.backendVersion.empty());
  EXPECT_TRUE(h.warnings.empty()) << h.warnings[0];
  expectSameMachine(s, h, s.numaNodes.size() > 1);
}

#ifdef BRAID_HAVE_HWLOC

// hwloc's XML for the machine buildTwoSocketMachine writes as sysfs: PUs 0-3 on
// package/node 0, 4-7 on package/node 1, core = cpu % 2 in each package; the
// PCI tree and OS devices below the packages; the distance matrix listed in
// the order node 1, node 0.
const char kTwoSocketXml[] = R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
 <object type="Machine" os_index="0" cpuset="0xff" complete_cpuset="0xff" allowed_cpuset="0xff" nodeset="0x3" complete_nodeset="0x3" allowed_nodeset="0x3" gp_index="1">
  <object type="Package" os_index="0" cpuset="0x0f" complete_cpuset="0x0f" nodeset="0x1" complete_nodeset="0x1" gp_index="2">
   <object type="NUMANode" os_index="0" cpuset="0x0f" complete_cpuset="0x0f" nodeset="0x1" complete_nodeset="0x1" gp_index="3" local_memory="1073741824"/>
   <object type="Core" os_index="0" cpuset="0x05" complete_cpuset="0x05" nodeset="0x1" complete_nodeset="0x1" gp_index="4">
    <object type="PU" os_index="0" cpuset="0x01" complete_cpuset="0x01" nodeset="0x1" complete_nodeset="0x1" gp_index="5"/>
    <object type="PU" os_index="2" cpuset="0x04" complete_cpuset="0x04" nodeset="0x1" complete_nodeset="0x1" gp_index="6"/>
   </object>
   <object type="Core" os_index="1" cpuset="0x0a" complete_cpuset="0x0a" nodeset="0x1" complete_nodeset="0x1" gp_index="7">
    <object type="PU" os_index="1" cpuset="0x02" complete_cpuset="0x02" nodeset="0x1" complete_nodeset="0x1" gp_index="8"/>
    <object type="PU" os_index="3" cpuset="0x08" complete_cpuset="0x08" nodeset="0x1" complete_nodeset="0x1" gp_index="9"/>
   </object>
   <object type="Bridge" gp_index="10" bridge_type="0-1" depth="0" bridge_pci="0000:[00-3c]">
    <object type="Bridge" gp_index="11" bridge_type="1-1" depth="1" bridge_pci="0000:[3b-3c]" pci_busid="0000:00:01.0" pci_type="0604 [8086:1234] [0000:0000] 00">
     <object type="PCIDev" gp_index="12" pci_busid="0000:3b:00.0" pci_type="0302 [10de:1234] [0000:0000] a1"/>
     <object type="PCIDev" gp_index="13" pci_busid="0000:3c:00.0" pci_type="0207 [15b3:1234] [0000:0000] 00">
      <object type="OSDev" gp_index="14" name="ib0" osdev_type="2"/>
      <object type="OSDev" gp_index="15" name="mlx5_0" osdev_type="3"/>
     </object>
    </object>
    <object type="PCIDev" gp_index="16" pci_busid="0000:00:03.0" pci_type="0200 [8086:1234] [0000:0000] 00">
     <object type="OSDev" gp_index="17" name="eth0" osdev_type="2"/>
    </object>
   </object>
  </object>
  <object type="Package" os_index="1" cpuset="0xf0" complete_cpuset="0xf0" nodeset="0x2" complete_nodeset="0x2" gp_index="20">
   <object type="NUMANode" os_index="1" cpuset="0xf0" complete_cpuset="0xf0" nodeset="0x2" complete_nodeset="0x2" gp_index="21" local_memory="1073741824"/>
   <object type="Core" os_index="0" cpuset="0x50" complete_cpuset="0x50" nodeset="0x2" complete_nodeset="0x2" gp_index="22">
    <object type="PU" os_index="4" cpuset="0x10" complete_cpuset="0x10" nodeset="0x2" complete_nodeset="0x2" gp_index="23"/>
    <object type="PU" os_index="6" cpuset="0x40" complete_cpuset="0x40" nodeset="0x2" complete_nodeset="0x2" gp_index="24"/>
   </object>
   <object type="Core" os_index="1" cpuset="0xa0" complete_cpuset="0xa0" nodeset="0x2" complete_nodeset="0x2" gp_index="25">
    <object type="PU" os_index="5" cpuset="0x20" complete_cpuset="0x20" nodeset="0x2" complete_nodeset="0x2" gp_index="26"/>
    <object type="PU" os_index="7" cpuset="0x80" complete_cpuset="0x80" nodeset="0x2" complete_nodeset="0x2" gp_index="27"/>
   </object>
   <object type="Bridge" gp_index="30" bridge_type="0-1" depth="0" bridge_pci="0000:[80-b0]">
    <object type="Bridge" gp_index="31" bridge_type="1-1" depth="1" bridge_pci="0000:[af-b0]" pci_busid="0000:80:01.0" pci_type="0604 [8086:1234] [0000:0000] 00">
     <object type="PCIDev" gp_index="32" pci_busid="0000:af:00.0" pci_type="0300 [10de:1234] [0000:0000] a1"/>
     <object type="PCIDev" gp_index="33" pci_busid="0000:b0:00.0" pci_type="0207 [15b3:1234] [0000:0000] 00">
      <object type="OSDev" gp_index="34" name="mlx5_1" osdev_type="3"/>
     </object>
    </object>
    <object type="PCIDev" gp_index="35" pci_busid="0000:80:02.0" pci_type="0300 [1a03:1234] [0000:0000] 00"/>
   </object>
  </object>
 </object>
 <distances2 type="NUMANode" nbobjs="2" kind="5" indexing="os">
  <indexes length="4">1 0 </indexes>
  <u64values length="12">DISTANCES </u64values>
 </distances2>
</topology>
)";

std::string twoSocketXml(const std::string& distances) {
  std::string xml = kTwoSocketXml;
  xml.replace(xml.find("DISTANCES"), 9, distances);
  return xml;
}

Topology fromXml(const std::string& xml, const SysfsFixture& fx) {
  Topology t;
  Result r = discoverTopologyHwlocXml(xml, fx.root(), &t);
  EXPECT_TRUE(r.ok()) << r.message();
  return t;
}

TEST(HwlocDiscovery, XmlTwinOfTheSysfsFixtureGivesTheSameTopology) {
  SKIP_WITHOUT_LIBHWLOC();
  SysfsFixture fx;
  testing::buildTwoSocketMachine(&fx);
  Topology s;
  ASSERT_TRUE(discoverTopology(fx.root(), &s).ok());
  Topology h = fromXml(twoSocketXml("10 21 21 10"), fx);
  EXPECT_EQ(h.backend, Backend::kHwloc);
  EXPECT_TRUE(h.warnings.empty()) << h.warnings[0];
  expectSameMachine(s, h, true);
  ASSERT_EQ(h.gpus().size(), 2u);
  EXPECT_EQ(h.gpus()[1]->path, "0000:80:01.0/0000:af:00.0");
  EXPECT_EQ(h.gpus()[1]->numaNode, 1);
}

TEST(HwlocDiscovery, DistancesFollowNodeOrderAndDeviceNamesComeFromHwloc) {
  SKIP_WITHOUT_LIBHWLOC();
  SysfsFixture fx;
  testing::buildTwoSocketMachine(&fx);
  // sysfs no longer says where eth0 sits; hwloc's OS device does.
  std::remove((fx.root() + "/class/net/eth0/device").c_str());
  // A prog-if byte sysfs knows and hwloc 2.9 does not keep, and a class file
  // that disagrees with hwloc (not used).
  fx.write("bus/pci/devices/0000:00:03.0/class", "0x020001");
  fx.write("bus/pci/devices/0000:3b:00.0/class", "0x020000");
  // Matrix rows in the order node 1, node 0: d(1,1) d(1,0) d(0,1) d(0,0).
  Topology t = fromXml(twoSocketXml("10 31 21 10"), fx);
  ASSERT_EQ(t.numaNodes.size(), 2u);
  EXPECT_EQ(t.numaNodes[0].distances, (std::vector<int>{10, 21}));
  EXPECT_EQ(t.numaNodes[1].distances, (std::vector<int>{31, 10}));
  ASSERT_EQ(t.interfaces.size(), 4u);
  EXPECT_EQ(t.interfaces[0].name, "eth0");
  EXPECT_EQ(t.interfaces[0].pciBusId, "0000:00:03.0");
  ASSERT_EQ(t.pci.size(), 5u);
  EXPECT_EQ(t.pci[0].busId, "0000:00:03.0");
  EXPECT_EQ(t.pci[0].classCode, 0x020001u);
  EXPECT_EQ(t.pci[1].busId, "0000:3b:00.0");
  EXPECT_EQ(t.pci[1].classCode, 0x030200u);
  EXPECT_EQ(t.pci[1].kind, PciKind::kGpu);
}

TEST(HwlocDiscovery, WithoutAMatrixTheSysfsDistancesAreUsed) {
  SKIP_WITHOUT_LIBHWLOC();
  SysfsFixture fx;
  testing::buildTwoSocketMachine(&fx);
  std::string xml = twoSocketXml("");
  const size_t from = xml.find(" <distances2");
  xml.erase(from, xml.find("</topology>") - from);
  Topology t = fromXml(xml, fx);
  ASSERT_EQ(t.numaNodes.size(), 2u);
  EXPECT_EQ(t.numaNodes[1].distances, (std::vector<int>{21, 10}));
}

TEST(HwlocDiscovery, BadXmlFails) {
  SKIP_WITHOUT_LIBHWLOC();
  SysfsFixture fx;
  Topology t;
  EXPECT_FALSE(discoverTopologyHwlocXml("<topology", fx.root(), &t).ok());
  EXPECT_FALSE(discoverTopologyHwlocXml("", fx.root(), &t).ok());
}

// ---- libhwloc loaded at run time ------------------------------------------

constexpr const char* kNoSuchHwloc = "libbraid-test-no-such-hwloc.so.15";

// Points the process's hwloc loader at other library names for one test.
class ScopedHwlocSonames {
 public:
  explicit ScopedHwlocSonames(const std::vector<std::string>& names) {
    setHwlocSonamesForTesting(names);
  }
  ~ScopedHwlocSonames() { setHwlocSonamesForTesting({}); }
  ScopedHwlocSonames(const ScopedHwlocSonames&) = delete;
  ScopedHwlocSonames& operator=(const ScopedHwlocSonames&) = delete;
};

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

TEST(HwlocLoader, OpensTheInstalledLibraryWithTheHeadersAbi) {
  std::shared_ptr<HwlocLibrary> lib;
  bool absent = true;
  Result r = HwlocLibrary::open(kHwlocSoname, &lib, &absent);
  if (!r.ok() && absent) GTEST_SKIP() << r.message();
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(lib->api().getApiVersion() >> 16, static_cast<unsigned>(HWLOC_API_VERSION >> 16));
  EXPECT_EQ(lib->soname(), kHwlocSoname);
}

TEST(HwlocLoader, MissingLibraryIsAbsent) {
  std::shared_ptr<HwlocLibrary> lib;
  bool absent = false;
  Result r = HwlocLibrary::open(kNoSuchHwloc, &lib, &absent);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(absent);
  EXPECT_EQ(lib, nullptr);
  EXPECT_TRUE(contains(r.message(), std::string("cannot load ") + kNoSuchHwloc)) << r.message();
}

TEST(HwlocLoader, LibraryWithoutHwlocIsUnusableNotAbsent) {
  std::shared_ptr<HwlocLibrary> lib;
  bool absent = true;
  Result r = HwlocLibrary::open("libc.so.6", &lib, &absent);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(absent);
  EXPECT_TRUE(contains(r.message(), "lacks hwloc_get_api_version")) << r.message();
}

TEST(HwlocLoader, OtherApiMajorIsRefused) {
  std::shared_ptr<HwlocLibrary> lib;
  bool absent = true;
  Result r = HwlocLibrary::open(BRAID_FAKE_HWLOC3, &lib, &absent);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(absent);
  EXPECT_EQ(lib, nullptr);
  EXPECT_TRUE(contains(r.message(), "has hwloc API 3.0, braid was built for 2.")) << r.message();
}

// The helpers hwloc.h inlines, rebuilt over the resolved entry points, on the
// XML twin: 8 PUs, 2 NUMA nodes (a virtual depth), 6 PCI functions, 4 OS
// devices, one NUMA matrix, and no Group objects at all.
TEST(HwlocLoader, InlineHelpersWalkTheLoadedTopology) {
  SKIP_WITHOUT_LIBHWLOC();
  std::shared_ptr<HwlocLibrary> lib = processHwloc().lib;
  ASSERT_NE(lib, nullptr);
  const HwlocApi& a = lib->api();
  hwloc_topology_t topo = nullptr;
  ASSERT_EQ(a.topologyInit(&topo), 0);
  const std::string xml = twoSocketXml("10 21 21 10");
  ASSERT_EQ(a.topologySetXmlbuffer(topo, xml.data(), static_cast<int>(xml.size()) + 1), 0);
  a.topologySetIoTypesFilter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  ASSERT_EQ(a.topologyLoad(topo), 0);
  auto count = [&](hwloc_obj_type_t type) {
    int n = 0;
    for (hwloc_obj_t o = lib->nextObjByType(topo, type, nullptr); o;
         o = lib->nextObjByType(topo, type, o))
      ++n;
    return n;
  };
  EXPECT_EQ(lib->rootObj(topo)->type, HWLOC_OBJ_MACHINE);
  EXPECT_EQ(count(HWLOC_OBJ_PU), 8);
  EXPECT_EQ(count(HWLOC_OBJ_NUMANODE), 2);
  EXPECT_EQ(count(HWLOC_OBJ_PCI_DEVICE), 6);
  EXPECT_EQ(count(HWLOC_OBJ_OS_DEVICE), 4);
  EXPECT_EQ(count(HWLOC_OBJ_GROUP), 0);
  unsigned nr = 1;
  hwloc_distances_s* d = nullptr;
  ASSERT_EQ(lib->distancesGetByType(topo, HWLOC_OBJ_NUMANODE, &nr, &d, 0, 0), 0);
  EXPECT_EQ(nr, 1u);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->nbobjs, 2u);
  a.distancesRelease(topo, d);
  nr = 1;
  EXPECT_EQ(lib->distancesGetByType(topo, HWLOC_OBJ_GROUP, &nr, &d, 0, 0), 0);
  EXPECT_EQ(nr, 0u);
  a.topologyDestroy(topo);
}

TEST(HwlocLoader, TriesTheNextNameWhenOneIsMissing) {
  SKIP_WITHOUT_LIBHWLOC();
  ScopedHwlocSonames names({kNoSuchHwloc, kHwlocSoname});
  HwlocLoad load = processHwloc();
  ASSERT_NE(load.lib, nullptr) << load.why;
  EXPECT_EQ(load.lib->soname(), kHwlocSoname);
}

TEST(HwlocLoader, AnUnusableLibraryIsReportedBeforeAMissingOne) {
  ScopedHwlocSonames names({kNoSuchHwloc, BRAID_FAKE_HWLOC3});
  HwlocLoad load = processHwloc();
  EXPECT_EQ(load.lib, nullptr);
  EXPECT_FALSE(load.absent);
  EXPECT_TRUE(contains(load.why, "has hwloc API 3.0")) << load.why;
}

TEST(TopoBackend, WithoutLibhwlocSysfsIsUsedWithoutWarning) {
  ScopedHwlocSonames names({kNoSuchHwloc});
  std::string why;
  EXPECT_FALSE(hwlocAvailable(&why));
  EXPECT_TRUE(contains(why, kNoSuchHwloc)) << why;
  EXPECT_TRUE(processHwloc().absent);
  std::string warning = "x";
  EXPECT_EQ(chooseBackend("", &warning), Backend::kSysfs);
  EXPECT_EQ(warning, "");
  ScopedTopoEnv env(nullptr);
  Topology t = machine();
  EXPECT_EQ(t.backend, Backend::kSysfs);
  EXPECT_TRUE(t.backendVersion.empty());
  EXPECT_TRUE(t.warnings.empty()) << t.warnings[0];
  EXPECT_FALSE(t.cpus.empty());
  // Direct hwloc discovery says why it cannot run.
  SysfsFixture fx;
  Result r = discoverTopologyHwlocXml(twoSocketXml("10 21 21 10"), fx.root(), &t);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.message(), kNoSuchHwloc)) << r.message();
}

TEST(TopoBackend, BraidTopoHwlocWithoutLibhwlocWarnsAndUsesSysfs) {
  ScopedHwlocSonames names({kNoSuchHwloc});
  std::string warning;
  EXPECT_EQ(chooseBackend("hwloc", &warning), Backend::kSysfs);
  EXPECT_TRUE(contains(warning, std::string("BRAID_TOPO=hwloc, but cannot load ") + kNoSuchHwloc))
      << warning;
  ScopedTopoEnv env("hwloc");
  Topology t = machine();
  EXPECT_EQ(t.backend, Backend::kSysfs);
  EXPECT_TRUE(warned(t, "BRAID_TOPO=hwloc, but cannot load"));
  EXPECT_FALSE(t.cpus.empty());
}

TEST(TopoBackend, BraidTopoHwlocWithAnotherHwlocAbiWarns) {
  ScopedHwlocSonames names({BRAID_FAKE_HWLOC3});
  std::string warning;
  EXPECT_EQ(chooseBackend("hwloc", &warning), Backend::kSysfs);
  EXPECT_TRUE(contains(warning, "has hwloc API 3.0")) << warning;
}

// One INFO line for a missing libhwloc, however often the backend is chosen,
// and no warning. Run in a fresh process (the log settings are read once),
// logging to stderr.
int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class OneInfoNoWarning : public ::testing::MatcherInterface<const std::string&> {
 public:
  bool MatchAndExplain(const std::string& err, ::testing::MatchResultListener*) const override {
    return occurrences(err, "BRAID INFO topology: hwloc is not installed (cannot load "
                            "libbraid-test-no-such-hwloc.so.15") == 1 &&
           occurrences(err, " WARN ") == 0;
  }
  void DescribeTo(std::ostream* os) const override {
    *os << "one INFO line saying hwloc is not installed, and no WARN line";
  }
};

TEST(TopoBackend, MissingLibhwlocIsOneInfoLine) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("NCCL_DEBUG", "INFO", 1);
        unsetenv("NCCL_DEBUG_SUBSYS");
        unsetenv("NCCL_DEBUG_FILE");
        setHwlocSonamesForTesting({kNoSuchHwloc});
        std::string warning;
        for (int i = 0; i < 3; ++i) chooseBackend("", &warning);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0),
      ::testing::Matcher<const std::string&>(new OneInfoNoWarning));  // the Matcher owns it
}

#else

TEST(HwlocDiscovery, XmlTwinOfTheSysfsFixtureGivesTheSameTopology) { SKIP_WITHOUT_HWLOC(); }

#endif  // BRAID_HAVE_HWLOC

}  // namespace
}  // namespace topology
}  // namespace braid
