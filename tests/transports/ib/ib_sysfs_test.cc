// The sysfs scanner over fixture trees.
#include <gtest/gtest.h>

#include "tests/transports/ib/ib_fixture.h"
#include "transports/ib/ib_sysfs.h"

namespace braid {
namespace ib {
namespace {

TEST(IbSysfs, NoClassDirectoryIsNoDevice) {
  SysfsFixture fx;
  EXPECT_TRUE(scanSysfsPorts(fx.root()).empty());
  EXPECT_TRUE(scanSysfsPorts("/nonexistent-braid-root").empty());
}

TEST(IbSysfs, ReadsStateLinkLayerAndGids) {
  SysfsFixture fx;
  fx.addPort("mlx5_1", 2, "1: DOWN", "InfiniBand");
  fx.addPort("mlx5_1", 1, "4: ACTIVE", "InfiniBand");
  fx.write("mlx5_1", 1, "gids/0", "fe80:0000:0000:0000:0202:c9ff:fe00:0001");
  fx.write("mlx5_1", 1, "gids/1", "0000:0000:0000:0000:0000:0000:0000:0000");
  fx.addPort("bnxt_re0", 1, "4: ACTIVE", "Ethernet");
  fx.write("bnxt_re0", 1, "gids/0", "fe80:0000:0000:0000:0000:00ff:fe00:0002");
  fx.write("bnxt_re0", 1, "gid_attrs/types/0", "IB/RoCE v1");
  fx.write("bnxt_re0", 1, "gids/3", "0000:0000:0000:0000:0000:ffff:0a00:0005");
  fx.write("bnxt_re0", 1, "gid_attrs/types/3", "RoCE v2");
  fx.write("bnxt_re0", 1, "gids/junk", "fe80:0000:0000:0000:0000:00ff:fe00:0002");

  const auto ports = scanSysfsPorts(fx.root());
  ASSERT_EQ(ports.size(), 3u);
  EXPECT_EQ(ports[0].device, "bnxt_re0");
  EXPECT_TRUE(ports[0].active);
  EXPECT_EQ(ports[0].linkLayer, LinkLayer::Ethernet);
  ASSERT_EQ(ports[0].gids.size(), 2u);
  EXPECT_EQ(ports[0].gids[0].index, 0);
  EXPECT_EQ(ports[0].gids[0].type, GidType::IbRoceV1);
  EXPECT_EQ(ports[0].gids[1].index, 3);
  EXPECT_EQ(ports[0].gids[1].type, GidType::RoceV2);
  EXPECT_EQ(ports[0].gids[1].raw[10], 0xff);
  EXPECT_EQ(ports[0].gids[1].raw[12], 0x0a);
  EXPECT_EQ(ports[0].gids[1].raw[15], 0x05);

  EXPECT_EQ(ports[1].device, "mlx5_1");
  EXPECT_EQ(ports[1].port, 1);
  EXPECT_TRUE(ports[1].active);
  EXPECT_EQ(ports[1].linkLayer, LinkLayer::InfiniBand);
  ASSERT_EQ(ports[1].gids.size(), 1u);  // the all-zero entry is skipped
  EXPECT_EQ(ports[1].gids[0].raw[0], 0xfe);
  EXPECT_EQ(ports[1].gids[0].raw[15], 0x01);
  EXPECT_EQ(ports[2].port, 2);
  EXPECT_FALSE(ports[2].active);

  int idx = -1;
  ASSERT_TRUE(chooseGidIndex(ports[0], -1, &idx).ok());
  EXPECT_EQ(idx, 3);
}

TEST(IbSysfs, MissingFilesLeavePortUnusable) {
  SysfsFixture fx;
  fx.write("odd0", 1, "link_layer", "Ethernet");  // no state file
  fx.write("odd1", 1, "state", "4: ACTIVE");      // no link layer
  const auto ports = scanSysfsPorts(fx.root());
  ASSERT_EQ(ports.size(), 2u);
  EXPECT_FALSE(ports[0].active);
  EXPECT_EQ(ports[1].linkLayer, LinkLayer::Unknown);
  EXPECT_TRUE(selectPorts(ports, HcaFilter{}, false).empty());
}

TEST(IbSysfs, GidText) {
  unsigned char g[16];
  EXPECT_TRUE(parseGidText("fe80:0000:0000:0000:0202:c9ff:fe00:00AB", g));
  EXPECT_EQ(g[0], 0xfe);
  EXPECT_EQ(g[15], 0xab);
  for (const char* bad : {"", "fe80::1", "fe80:0000:0000:0000:0202:c9ff:fe00:000",
                          "fe80:0000:0000:0000:0202:c9ff:fe00:000g",
                          "fe8:00000:0000:0000:0202:c9ff:fe00:0001",
                          "fe80:0000:0000:0000:0202:c9ff:fe00:0001:"})
    EXPECT_FALSE(parseGidText(bad, g)) << bad;
}

}  // namespace
}  // namespace ib
}  // namespace braid
