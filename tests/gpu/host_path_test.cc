// The CUDA build on host buffers: collectives keep the host path and make no
// CUDA call while the application has not loaded the CUDA driver, and
// braidSupportsDeviceBuffers() tells whether this machine can use device
// buffers (0 on a machine without a GPU). Runs everywhere, GPU or not.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <nccl.h>

#include <vector>

#include "braid.h"
#include "engine/comm.h"
#include "engine/device/device.h"
#include "gpu_env.h"

namespace {

bool driverLoaded() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (h) dlclose(h);
  return h != nullptr;
}

// First in this process: nothing here has touched CUDA yet.
TEST(HostPath, HostCollectivesMakeNoCudaCall) {
  const bool loadedBefore = driverLoaded();
  const int n = 2;
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<float>> bufs(n, std::vector<float>(1000, 1.5f));
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < n; ++r)
      ASSERT_EQ(ncclAllReduce(bufs[r].data(), bufs[r].data(), 1000, ncclFloat32, ncclSum, comms[r], nullptr),
                ncclSuccess) << ncclGetLastError(nullptr);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  }
  for (int r = 0; r < n; ++r) EXPECT_EQ(bufs[r][999], 1.5f * 8);  // doubled three times
  for (ncclComm_t c : comms) {
    EXPECT_FALSE(c->deviceProxy) << "a host call started the device proxy";
    ncclCommDestroy(c);
  }
  if (loadedBefore) GTEST_SKIP() << "libcuda.so.1 was loaded before the test: cannot check the driver stays unloaded";
  EXPECT_FALSE(driverLoaded()) << "host collectives loaded the CUDA driver";
  EXPECT_FALSE(braid::device::isDeviceMemory(bufs[0].data()));
}

TEST(HostPath, SupportsDeviceBuffersMatchesTheMachine) {
  const std::string noGpu = gputest::noGpuReasonForked();
  EXPECT_EQ(braidSupportsDeviceBuffers(), noGpu.empty() ? 1 : 0) << (noGpu.empty() ? "GPU present" : noGpu);
  std::vector<float> host(16, 1.0f);
  EXPECT_FALSE(braid::device::isDeviceMemory(host.data()));
  EXPECT_FALSE(braid::device::isDeviceMemory(nullptr));
}

}  // namespace
