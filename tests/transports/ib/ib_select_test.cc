// NCCL_IB_HCA / NCCL_IB_DISABLE / NCCL_IB_GID_INDEX over described machines.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "transports/ib/ib_device_select.h"

namespace braid {
namespace ib {
namespace {

PortDesc port(const std::string& dev, int n, bool active = true,
              LinkLayer ll = LinkLayer::InfiniBand) {
  PortDesc p;
  p.device = dev;
  p.port = n;
  p.active = active;
  p.linkLayer = ll;
  return p;
}

std::vector<PortDesc> machine() {
  return {port("mlx5_0", 1), port("mlx5_1", 1), port("mlx5_1", 2), port("mlx5_10", 1),
          port("mlx4_0", 1), port("mlx5_2", 1, false), port("bnxt_re0", 1, true, LinkLayer::Ethernet)};
}

std::vector<std::string> select(const std::string& hca, bool disabled = false) {
  HcaFilter f;
  Result r = parseHcaFilter(hca, &f);
  EXPECT_TRUE(r.ok()) << r.message();
  std::vector<std::string> names;
  for (const auto& p : selectPorts(machine(), f, disabled))
    names.push_back(p.device + ":" + std::to_string(p.port));
  return names;
}

using Names = std::vector<std::string>;

TEST(IbHca, EmptyKeepsEveryActivePort) {
  EXPECT_EQ(select(""), (Names{"mlx5_0:1", "mlx5_1:1", "mlx5_1:2", "mlx5_10:1", "mlx4_0:1",
                               "bnxt_re0:1"}));
}

TEST(IbHca, DisableWins) { EXPECT_TRUE(select("", true).empty()); }

TEST(IbHca, PrefixMatch) {
  EXPECT_EQ(select("mlx5"), (Names{"mlx5_0:1", "mlx5_1:1", "mlx5_1:2", "mlx5_10:1"}));
  EXPECT_EQ(select("mlx5_1"), (Names{"mlx5_1:1", "mlx5_1:2", "mlx5_10:1"}));
}

TEST(IbHca, ExactMatch) {
  EXPECT_EQ(select("=mlx5_1"), (Names{"mlx5_1:1", "mlx5_1:2"}));
  EXPECT_TRUE(select("=mlx5").empty());
}

TEST(IbHca, PortRestricts) {
  EXPECT_EQ(select("mlx5_1:2,mlx4_0:1"), (Names{"mlx5_1:2", "mlx4_0:1"}));
  EXPECT_EQ(select("=mlx5_1:1"), (Names{"mlx5_1:1"}));
}

TEST(IbHca, Exclude) {
  EXPECT_EQ(select("^mlx5"), (Names{"mlx4_0:1", "bnxt_re0:1"}));
  EXPECT_EQ(select("^=mlx5_1:1,bnxt_re0"),
            (Names{"mlx5_0:1", "mlx5_1:2", "mlx5_10:1", "mlx4_0:1"}));
}

TEST(IbHca, InactivePortNeverChosen) { EXPECT_TRUE(select("=mlx5_2").empty()); }

TEST(IbHca, SpacesAndEmptyItemsTolerated) {
  EXPECT_EQ(select(" mlx4_0 , ,bnxt_re0:1,"), (Names{"mlx4_0:1", "bnxt_re0:1"}));
}

TEST(IbHca, MalformedEntriesRejected) {
  for (const char* bad : {"mlx5_0:x", ":1", "mlx5_0:0", "mlx5_0:256", "mlx5_0:", "mlx5_0:1:2"}) {
    HcaFilter f;
    Result r = parseHcaFilter(bad, &f);
    EXPECT_EQ(r.code(), ncclInvalidUsage) << bad;
    EXPECT_NE(r.message().find("NCCL_IB_HCA"), std::string::npos) << r.message();
  }
}

TEST(IbGidIndex, Parse) {
  int v = 99;
  ASSERT_TRUE(parseGidIndex("", &v).ok());
  EXPECT_EQ(v, -1);
  ASSERT_TRUE(parseGidIndex("0", &v).ok());
  EXPECT_EQ(v, 0);
  ASSERT_TRUE(parseGidIndex(" 3 ", &v).ok());
  EXPECT_EQ(v, 3);
  for (const char* bad : {"-1", "x", "3x", "65536", "1.5"})
    EXPECT_EQ(parseGidIndex(bad, &v).code(), ncclInvalidUsage) << bad;
}

GidEntry gid(int index, GidType type, bool ipv4) {
  GidEntry g;
  g.index = index;
  g.type = type;
  if (ipv4) {
    g.raw[10] = g.raw[11] = 0xff;
    g.raw[12] = 10;
    g.raw[15] = static_cast<unsigned char>(index);
  } else {
    g.raw[0] = 0xfe;
    g.raw[1] = 0x80;
    g.raw[15] = static_cast<unsigned char>(index);
  }
  return g;
}

TEST(IbGidIndex, RocePrefersV2Ipv4) {
  PortDesc p = port("bnxt_re0", 1, true, LinkLayer::Ethernet);
  p.gids = {gid(0, GidType::IbRoceV1, false), gid(1, GidType::RoceV2, false),
            gid(2, GidType::IbRoceV1, true), gid(3, GidType::RoceV2, true)};
  int idx = -1;
  ASSERT_TRUE(chooseGidIndex(p, -1, &idx).ok());
  EXPECT_EQ(idx, 3);
  p.gids.pop_back();
  ASSERT_TRUE(chooseGidIndex(p, -1, &idx).ok());
  EXPECT_EQ(idx, 1);
  p.gids = {gid(4, GidType::IbRoceV1, false)};
  ASSERT_TRUE(chooseGidIndex(p, -1, &idx).ok());
  EXPECT_EQ(idx, 4);
  p.gids.clear();
  EXPECT_EQ(chooseGidIndex(p, -1, &idx).code(), ncclSystemError);
}

TEST(IbGidIndex, ConfiguredMustExist) {
  PortDesc p = port("bnxt_re0", 1, true, LinkLayer::Ethernet);
  p.gids = {gid(0, GidType::IbRoceV1, false), gid(3, GidType::RoceV2, true)};
  int idx = -1;
  ASSERT_TRUE(chooseGidIndex(p, 0, &idx).ok());
  EXPECT_EQ(idx, 0);
  Result r = chooseGidIndex(p, 2, &idx);
  EXPECT_EQ(r.code(), ncclInvalidUsage);
  EXPECT_NE(r.message().find("NCCL_IB_GID_INDEX=2"), std::string::npos) << r.message();
}

TEST(IbGidIndex, InfiniBandUsesZero) {
  PortDesc p = port("mlx5_0", 1);
  int idx = -1;
  ASSERT_TRUE(chooseGidIndex(p, -1, &idx).ok());
  EXPECT_EQ(idx, 0);
}

}  // namespace
}  // namespace ib
}  // namespace braid
