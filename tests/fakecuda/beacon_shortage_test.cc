// Plan kernel launches that find no lane beacons free (BRAID_LANE_BEACONS):
// they run unwatched, still right, and each communicator says so once at
// WARN, not once per launch (a perf tool queueing hundreds of launches
// printed a line for each). CTest sets NCCL_DEBUG=WARN and NCCL_DEBUG_FILE;
// a thread per rank on the fake runtime, under the recorder.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kRanks = 4;
constexpr int kCalls = 40;

// The WARN lines logged so far that say a launch runs unwatched, per rank.
std::vector<int> unwatchedWarnings() {
  std::vector<int> n(kRanks, 0);
  const char* pattern = getenv("NCCL_DEBUG_FILE");
  if (pattern == nullptr) return {};
  std::string path = pattern;
  const size_t at = path.find("%p");
  if (at != std::string::npos) path.replace(at, 2, std::to_string(getpid()));
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.find("WARN") == std::string::npos || line.find("runs unwatched") == std::string::npos) continue;
    for (int r = 0; r < kRanks; ++r)
      if (line.find("rank " + std::to_string(r) + ":") != std::string::npos) ++n[r];
  }
  return n;
}

// kCalls allreduces queued on each rank's stream from a thread per rank; the
// sums checked. `beacons` is BRAID_LANE_BEACONS at creation (empty: unset).
void queueCalls(const char* beacons) {
  setenv("BRAID_DEVICE_ENGINE", "kernels", 1);
  if (beacons) setenv("BRAID_LANE_BEACONS", beacons, 1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ncclComm_t comms[kRanks] = {};
  int devs[kRanks] = {};
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
  unsetenv("BRAID_DEVICE_ENGINE");
  unsetenv("BRAID_LANE_BEACONS");
  std::vector<float*> send(kRanks), recv(kRanks);
  std::vector<cudaStream_t> streams(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&send[r], 64 * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&recv[r], 64 * sizeof(float)), cudaSuccess);
    const std::vector<float> mine(64, float(r + 1));
    ASSERT_EQ(cudaMemcpy(send[r], mine.data(), 64 * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      if (cudaSetDevice(0) != cudaSuccess) return void(errors[r] = "cudaSetDevice");
      for (int i = 0; i < kCalls; ++i)
        if (ncclAllReduce(send[r], recv[r], 64, ncclFloat32, ncclSum, comms[r], streams[r]) != ncclSuccess)
          return void(errors[r] = ncclGetLastError(comms[r]));
      if (cudaStreamSynchronize(streams[r]) != cudaSuccess) errors[r] = "cudaStreamSynchronize";
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    std::vector<float> got(64);
    ASSERT_EQ(cudaMemcpy(got.data(), recv[r], 64 * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], 10.0f) << "rank " << r << ", element " << i;
  }
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
    cudaFree(send[r]);
    cudaFree(recv[r]);
    cudaStreamDestroy(streams[r]);
  }
}

// One beacon: every launch needs at least two (a lane and the launch's
// failure word), so each runs unwatched; each communicator warns once.
TEST(BeaconShortage, UnwatchedLaunchesAreRightAndWarnOncePerCommunicator) {
  ASSERT_FALSE(unwatchedWarnings().empty()) << "NCCL_DEBUG_FILE is set by CTest";
  ASSERT_NO_FATAL_FAILURE(queueCalls("1"));
  EXPECT_EQ(unwatchedWarnings(), std::vector<int>(kRanks, 1));
}

// The default holds the queued launches of a perf tool's small calls: no
// launch runs unwatched (no new line after the test above's).
TEST(BeaconShortage, TheDefaultBeaconsWatchEveryQueuedLaunch) {
  const std::vector<int> before = unwatchedWarnings();
  ASSERT_FALSE(before.empty()) << "NCCL_DEBUG_FILE is set by CTest";
  ASSERT_NO_FATAL_FAILURE(queueCalls(nullptr));
  EXPECT_EQ(unwatchedWarnings(), before);
}

}  // namespace
