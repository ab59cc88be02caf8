// The plan kernels' launches (src/engine/device/launch_plan.h) under an
// emulated GPU scheduler (gpu_scheduler.h): lanes dispatched in issue order
// onto as many slots as the device holds resident, never preempted. The
// launches braid plans never leave a resident lane waiting for one that is
// not; the emulation shows that one launch per stream (what the device path
// did) hangs as soon as one rank's lanes fill the device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/device/launch_plan.h"
#include "tests/kernels/exec_harness.h"

namespace exectest {
namespace {

using braid::schedule::Algorithm;
using braid::schedule::Collective;
using braid::device::Launch;
using braid::device::LaunchPart;

CollCase ringCase(int nranks) {
  CollCase c;
  c.coll = Collective::AllReduce;
  c.algorithm = Algorithm::Ring;
  c.nranks = nranks;
  c.count = 400;
  c.chunkElems = 25;
  c.nchannels = 2;
  return c;
}

// Every rank of the case on device 0, each on a stream of its own (as ranks
// of one process on one GPU usually are).
std::vector<LaunchPart> partsOf(const CollCase& c, const std::vector<braid::schedule::Plan>& plans, int devices = 1) {
  std::vector<LaunchPart> parts;
  for (int r = 0; r < c.nranks; ++r) {
    LaunchPart p;
    p.rank = r;
    p.device = r % devices;
    p.stream = reinterpret_cast<const void*>(uintptr_t(0x1000 + r));
    p.lanes = uint32_t(plans[size_t(r)].lanes.size());
    parts.push_back(p);
  }
  return parts;
}

uint32_t totalLanes(const std::vector<braid::schedule::Plan>& plans) {
  uint32_t n = 0;
  for (const braid::schedule::Plan& p : plans) n += uint32_t(p.lanes.size());
  return n;
}

TEST(Residency, PlannedLaunchesNeverWaitOnANonResidentLane) {
  for (int nranks : {2, 3, 4}) {
    const CollCase c = ringCase(nranks);
    const auto plans = makePlans(c);
    const uint32_t lanes = totalLanes(plans);
    std::vector<Launch> launches;
    ASSERT_TRUE(braid::device::planLaunches(partsOf(c, plans), [&](int) { return lanes; }, &launches).ok());
    ASSERT_EQ(launches.size(), 1u) << "one launch per device";
    EXPECT_EQ(launches[0].lanes, lanes);
    EXPECT_EQ(launches[0].joined.size(), size_t(nranks - 1)) << "every other rank's stream joined";
    RunConfig cfg;
    cfg.maxPolls = uint64_t(1) << 18;
    for (const Launch& l : launches) {
      cfg.launches.emplace_back();
      for (size_t part : l.parts) cfg.launches.back().push_back(int(part));
    }
    cfg.residentSlots = lanes;  // exactly what the device holds
    EXPECT_EQ(runAndCompare(c, cfg, uint64_t(nranks)), "") << nranks << " ranks";
  }
}

// The emulation catches a launch order that can hang: one launch per rank
// (per stream), and a device that holds one rank's lanes at a time.
TEST(Residency, OneLaunchPerStreamHangsWhenOnlyOneFits) {
  const CollCase c = ringCase(2);
  const auto plans = makePlans(c);
  RunConfig cfg;
  cfg.maxPolls = uint64_t(1) << 14;
  cfg.launches = {{0}, {1}};
  cfg.residentSlots = uint32_t(plans[0].lanes.size());
  EXPECT_NE(runAndCompare(c, cfg, 1).find("timed out"), std::string::npos);
  // With room for both it runs: the hang is the residency, not the lanes.
  cfg.residentSlots = totalLanes(plans);
  cfg.maxPolls = uint64_t(1) << 18;
  EXPECT_EQ(runAndCompare(c, cfg, 1), "");
}

TEST(Residency, ADeviceThatCannotHoldTheLanesIsRefused) {
  const CollCase c = ringCase(4);
  const auto plans = makePlans(c);
  std::vector<Launch> launches;
  const braid::Result r = braid::device::planLaunches(partsOf(c, plans), [](int) { return 3u; }, &launches);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), ncclInvalidUsage);
  EXPECT_NE(r.message().find("ranks 0, 1, 2, 3 on CUDA device 0 need " + std::to_string(totalLanes(plans)) +
                             " lanes resident at once, but the device holds 3"),
            std::string::npos)
      << r.message();
}

// Ranks on two devices: a launch each, with the streams of its own ranks.
TEST(Residency, OneLaunchPerDevice) {
  const CollCase c = ringCase(4);
  const auto plans = makePlans(c);
  std::vector<Launch> launches;
  ASSERT_TRUE(braid::device::planLaunches(partsOf(c, plans, 2), [](int) { return 100u; }, &launches).ok());
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ(launches[0].device, 0);
  EXPECT_EQ(launches[0].parts, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(launches[1].parts, (std::vector<size_t>{1, 3}));
  EXPECT_EQ(launches[1].stream, reinterpret_cast<const void*>(uintptr_t(0x1001)));
  EXPECT_EQ(launches[1].joined, (std::vector<const void*>{reinterpret_cast<const void*>(uintptr_t(0x1003))}));
}

}  // namespace
}  // namespace exectest
