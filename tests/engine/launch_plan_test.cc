// src/engine/device/launch_plan: whose plan kernels would only take turns on a
// GPU. Ranks of different processes on one GPU time-slice unless an MPS
// daemon serves the host; the communicator's device path then stages instead,
// on every rank alike.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/scoped_env.h"
#include "engine/device/launch_plan.h"

namespace braid {
namespace {

PeerInfo rankOn(int rank, uint64_t host, uint64_t process, int gpu) {
  PeerInfo p{};
  p.rank = rank;
  p.hostHash = host;
  p.processId = process;
  p.gpuBusId = gpu;
  return p;
}

const int kGpuA = device::packGpuBusId(0, 0x1b, 0);
const int kGpuB = device::packGpuBusId(0, 0x3d, 0);

TEST(TimeSlicedPeers, RanksOfOtherProcessesOnOneGpuAreNamedWithTheGpu) {
  const std::vector<PeerInfo> peers = {rankOn(0, 1, 100, kGpuA), rankOn(1, 1, 101, kGpuA), rankOn(2, 1, 102, kGpuB),
                                       rankOn(3, 1, 103, kGpuA)};
  const std::string why = device::timeSlicedPeers(peers, false);
  EXPECT_NE(why.find("ranks 0, 1, 3 share a GPU (PCI 0000:1b:00) from different processes"), std::string::npos)
      << why;
  EXPECT_EQ(device::timeSlicedPeers(peers, true), "") << "MPS runs their kernels together";
}

// Rank 2 has its GPU to itself, but its peers stage: it must stage too (a
// rank running plan kernels and a staging peer would never meet), so every
// rank gets the same answer, which depends only on the peers' information.
TEST(TimeSlicedPeers, TheSameAnswerOnEveryRank) {
  const std::vector<PeerInfo> peers = {rankOn(0, 1, 100, kGpuB), rankOn(1, 1, 101, kGpuA), rankOn(2, 1, 102, kGpuA)};
  const std::string why = device::timeSlicedPeers(peers, false);
  EXPECT_NE(why.find("ranks 1, 2 share a GPU (PCI 0000:1b:00)"), std::string::npos) << why;
}

TEST(TimeSlicedPeers, RanksOfOneProcessOtherHostsAndUnknownGpusDoNot) {
  // One process (ranks as threads): their lanes share one launch.
  EXPECT_EQ(device::timeSlicedPeers({rankOn(0, 1, 100, kGpuA), rankOn(1, 1, 100, kGpuA)}, false), "");
  // Another host's GPU at the same PCI address is another GPU.
  EXPECT_EQ(device::timeSlicedPeers({rankOn(0, 1, 100, kGpuA), rankOn(1, 2, 101, kGpuA)}, false), "");
  // CUDA not in use at creation: nothing is claimed.
  EXPECT_EQ(device::timeSlicedPeers({rankOn(0, 1, 100, -1), rankOn(1, 1, 101, -1)}, false), "");
}

TEST(MpsDaemon, SeenByItsControlSocketInThePipeDirectory) {
  char dir[] = "/tmp/braid_mps_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  {
    braidtest::ScopedEnv env({{"CUDA_MPS_PIPE_DIRECTORY", dir}});
    EXPECT_FALSE(device::mpsDaemonRunning());
    const std::string control = std::string(dir) + "/control";
    FILE* f = fopen(control.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fclose(f);
    EXPECT_TRUE(device::mpsDaemonRunning());
    unlink(control.c_str());
  }
  rmdir(dir);
}

}  // namespace
}  // namespace braid
