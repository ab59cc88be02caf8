// The run-time loader, the owning wrappers and the probe's fallback to TCP.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/transports/ib/ib_fixture.h"
#include "transports/ib/ib_probe.h"
#include "transports/ib/ib_transport.h"
#include "transports/ib/ib_verbs_loader.h"

namespace braid {
namespace ib {
namespace {

constexpr const char* kMissing = "libbraid-test-no-such-ibverbs.so.1";

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

int liveFakeObjects() {
  void* h = dlopen(BRAID_FAKE_IBVERBS, RTLD_NOW | RTLD_NOLOAD);
  if (!h) return -1;  // not loaded
  auto fn = reinterpret_cast<int (*)()>(dlsym(h, "fake_ibv_live_objects"));
  const int n = fn ? fn() : -2;
  dlclose(h);
  return n;
}

TEST(IbLoader, MissingLibraryIsAClearError) {
  std::shared_ptr<VerbsLibrary> lib;
  Result r = VerbsLibrary::open(kMissing, &lib);
  EXPECT_EQ(r.code(), ncclSystemError);
  EXPECT_TRUE(contains(r.message(), kMissing)) << r.message();
  EXPECT_EQ(lib, nullptr);
}

TEST(IbLoader, MissingSymbolRejectsLibrary) {
  std::shared_ptr<VerbsLibrary> lib;
  Result r = VerbsLibrary::open(BRAID_FAKE_IBVERBS_PARTIAL, &lib);
  EXPECT_EQ(r.code(), ncclSystemError);
  EXPECT_TRUE(contains(r.message(), "ibv_modify_qp")) << r.message();
  EXPECT_EQ(lib, nullptr);
  // Nothing stays loaded after a rejected library.
  EXPECT_EQ(dlopen(BRAID_FAKE_IBVERBS_PARTIAL, RTLD_NOW | RTLD_NOLOAD), nullptr);
}

TEST(IbLoader, WrappersDestroyEveryObjectAndUnload) {
  {
    std::shared_ptr<VerbsLibrary> lib;
    Result r = VerbsLibrary::open(BRAID_FAKE_IBVERBS, &lib);
    ASSERT_TRUE(r.ok()) << r.message();
    DeviceList devices;
    ASSERT_TRUE(DeviceList::get(lib, &devices).ok());
    ASSERT_EQ(devices.size(), 2);
    EXPECT_EQ(devices.name(1), "mlx5_1");
    Context ctx;
    ASSERT_TRUE(openContext(lib, devices.at(0), &ctx).ok());
    ProtectionDomain pd;
    ASSERT_TRUE(allocPd(lib, ctx.get(), &pd).ok());
    char buf[64];
    MemoryRegion mr;
    ASSERT_TRUE(regMr(lib, pd.get(), buf, sizeof(buf), kAccessLocalWrite, &mr).ok());
    MemoryRegion failed;
    Result bad = regMr(lib, pd.get(), buf, 0, kAccessLocalWrite, &failed);
    EXPECT_FALSE(bad.ok());
    EXPECT_TRUE(contains(bad.message(), "ibv_reg_mr")) << bad.message();
    EXPECT_FALSE(failed);
    CompletionQueue cq;
    ASSERT_TRUE(createCq(lib, ctx.get(), 16, &cq).ok());
    IbvQpInitAttr attr{};
    QueuePair qp;
    ASSERT_TRUE(createQp(lib, pd.get(), &attr, &qp).ok());
    EXPECT_EQ(liveFakeObjects(), 6);  // list, context, pd, mr, cq, qp
    MemoryRegion moved = std::move(mr);
    EXPECT_FALSE(mr);
    EXPECT_TRUE(moved);
    moved.reset();
    EXPECT_EQ(liveFakeObjects(), 5);
    lib.reset();  // the objects keep the library loaded
    EXPECT_EQ(liveFakeObjects(), 5);
  }
  EXPECT_EQ(liveFakeObjects(), -1);  // all destroyed, then unloaded
}

IbProbeOptions fixtureOptions(const SysfsFixture& fx, const char* soname) {
  IbProbeOptions o;
  o.sysRoot = fx.root();
  o.soname = soname;
  return o;
}

TEST(IbProbe, NoDeviceMeansTcpWithoutLoadingVerbs) {
  SysfsFixture fx;
  const IbProbeResult p = probeIb(fixtureOptions(fx, BRAID_FAKE_IBVERBS));
  EXPECT_FALSE(p.usable);
  EXPECT_TRUE(contains(p.reason, "no device")) << p.reason;
  EXPECT_EQ(p.lib, nullptr);
}

TEST(IbProbe, DeviceButNoLibraryMeansTcp) {
  SysfsFixture fx;
  fx.addPort("mlx5_0", 1, "4: ACTIVE", "InfiniBand");
  const IbProbeResult p = probeIb(fixtureOptions(fx, kMissing));
  EXPECT_FALSE(p.usable);
  EXPECT_TRUE(contains(p.reason, kMissing)) << p.reason;
}

TEST(IbProbe, UsableWithDeviceAndLibrary) {
  SysfsFixture fx;
  fx.addPort("mlx5_0", 1, "4: ACTIVE", "InfiniBand");
  fx.addPort("mlx5_1", 1, "4: ACTIVE", "Ethernet");
  fx.addPort("mlx5_9", 1, "4: ACTIVE", "InfiniBand");  // in sysfs, unknown to verbs
  IbProbeOptions o = fixtureOptions(fx, BRAID_FAKE_IBVERBS);
  IbProbeResult p = probeIb(o);
  ASSERT_TRUE(p.usable) << p.reason;
  ASSERT_EQ(p.ports.size(), 2u);
  EXPECT_EQ(p.ports[0].device, "mlx5_0");
  EXPECT_EQ(p.ports[1].device, "mlx5_1");
  EXPECT_NE(p.lib, nullptr);

  o.hca = "=mlx5_1";
  o.gidIndex = "3";
  p = probeIb(o);
  ASSERT_TRUE(p.usable) << p.reason;
  ASSERT_EQ(p.ports.size(), 1u);
  EXPECT_EQ(p.ports[0].device, "mlx5_1");
  EXPECT_EQ(p.gidIndex, 3);

  o.hca = "=mlx5_9";
  p = probeIb(o);
  EXPECT_FALSE(p.usable);
  EXPECT_TRUE(contains(p.reason, "provider")) << p.reason;
}

TEST(IbProbe, VariablesCanRuleItOut) {
  SysfsFixture fx;
  fx.addPort("mlx5_0", 1, "4: ACTIVE", "InfiniBand");
  IbProbeOptions o = fixtureOptions(fx, BRAID_FAKE_IBVERBS);
  o.disabled = true;
  EXPECT_TRUE(contains(probeIb(o).reason, "NCCL_IB_DISABLE"));
  o.disabled = false;
  o.hca = "mlx4";
  EXPECT_TRUE(contains(probeIb(o).reason, "NCCL_IB_HCA=mlx4"));
  o.hca = "mlx5_0:zero";
  EXPECT_TRUE(contains(probeIb(o).reason, "NCCL_IB_HCA"));
  o.hca = "";
  o.gidIndex = "-2";
  EXPECT_TRUE(contains(probeIb(o).reason, "NCCL_IB_GID_INDEX"));
}

TEST(IbProbe, RealLibibverbsWhenInstalled) {
  std::shared_ptr<VerbsLibrary> lib;
  Result r = VerbsLibrary::open(kVerbsSoname, &lib);
  if (!r.ok()) GTEST_SKIP() << "libibverbs not installed: " << r.message();
  DeviceList devices;
  Result listed = DeviceList::get(lib, &devices);
  ASSERT_TRUE(listed.ok()) << listed.message();
  for (int i = 0; i < devices.size(); ++i) EXPECT_FALSE(devices.name(i).empty());
  if (devices.size() == 0) {
    // The probe must then fall back even if sysfs claims a device.
    SysfsFixture fx;
    fx.addPort("mlx5_0", 1, "4: ACTIVE", "InfiniBand");
    const IbProbeResult p = probeIb(fixtureOptions(fx, kVerbsSoname));
    EXPECT_FALSE(p.usable);
    EXPECT_TRUE(contains(p.reason, "libibverbs sees none")) << p.reason;
  }
}

TEST(IbTransport, OffByDefaultEvenWithAUsableProbe) {
  SysfsFixture fx;
  fx.addPort("mlx5_0", 1, "4: ACTIVE", "InfiniBand");
  IbProbeResult p = probeIb(fixtureOptions(fx, BRAID_FAKE_IBVERBS));
  ASSERT_TRUE(p.usable) << p.reason;
  auto t = makeIbTransport(std::move(p));
  PeerInfo a{}, b{};
  b.rank = 1;
  b.hostHash = 1;  // another host
  EXPECT_STREQ(t->name(), "ib");
  EXPECT_FALSE(t->canConnect(a, b));  // BRAID_IB_DATAPATH not given
  IbTransportOptions on;
  on.dataPath = true;
  EXPECT_FALSE(makeIbTransport(IbProbeResult{}, on)->canConnect(a, b));  // no device
}

}  // namespace
}  // namespace ib
}  // namespace braid
