// braid next to a CUDA graph that another thread captures in the default
// (global) mode, as a training program captures its step on one thread while
// another makes, uses or destroys communicators: braid's allocations, queries
// and synchronisations are "unsafe" calls, which CUDA refuses and which
// invalidate that capture unless braid makes them in relaxed mode. Under the
// fake runtime's capture rules (fake_capture.h): every communicator life-cycle
// call and device collective, on both engines, leaves the capture valid.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kRanks = 2;
constexpr size_t kCount = 4099;

// A global-mode capture held open on its own thread until told to end.
class HeldCapture {
 public:
  HeldCapture() : thread_([this] { run(); }) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return begun_; });
  }
  ~HeldCapture() {
    if (thread_.joinable()) end();
  }
  HeldCapture(const HeldCapture&) = delete;
  HeldCapture& operator=(const HeldCapture&) = delete;

  cudaError_t beginResult() const { return beginResult_; }
  // Ends the capture; what cudaStreamEndCapture said.
  cudaError_t end() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ending_ = true;
    }
    cv_.notify_all();
    thread_.join();
    return endResult_;
  }

 private:
  void run() {
    cudaStream_t s = nullptr;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    beginResult_ = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    {
      std::unique_lock<std::mutex> lock(mu_);
      begun_ = true;
      cv_.notify_all();
      cv_.wait(lock, [this] { return ending_; });
    }
    cudaGraph_t g = nullptr;
    endResult_ = cudaStreamEndCapture(s, &g);
    if (g) cudaGraphDestroy(g);
    cudaStreamDestroy(s);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool begun_ = false, ending_ = false;
  cudaError_t beginResult_ = cudaSuccess, endResult_ = cudaErrorUnknown;
  std::thread thread_;
};

class CaptureNeighbour : public testing::TestWithParam<const char*> {};

TEST_P(CaptureNeighbour, CommunicatorsMadeUsedAndDestroyedLeaveTheCaptureValid) {
  setenv("BRAID_DEVICE_ENGINE", GetParam(), 1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  // Streams and buffers first: the test's own calls are not braid's.
  cudaStream_t streams[kRanks] = {};
  float* bufs[kRanks] = {};
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&bufs[r]), kCount * sizeof(float)), cudaSuccess);
    const std::vector<float> v(kCount, float(r + 1));
    ASSERT_EQ(cudaMemcpy(bufs[r], v.data(), kCount * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  HeldCapture capture;
  ASSERT_EQ(capture.beginResult(), cudaSuccess);
  ncclComm_t comms[kRanks] = {};
  int devs[kRanks] = {};
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, devs), ncclSuccess) << ncclGetLastError(nullptr);
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < kRanks; ++r)
      ASSERT_EQ(ncclAllReduce(bufs[r], bufs[r], kCount, ncclFloat32, ncclSum, comms[r], streams[r]), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  }
  for (int r = 0; r < kRanks; ++r) {
    ncclResult_t async = ncclInProgress;
    // Queries the communicator's device state (its inflight work) as a
    // training loop's watchdog does.
    ASSERT_EQ(ncclCommGetAsyncError(comms[r], &async), ncclSuccess);
    EXPECT_NE(async, ncclInProgress);
  }
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(ncclCommDestroy(comms[r]), ncclSuccess);
  unsetenv("BRAID_DEVICE_ENGINE");
  EXPECT_EQ(capture.end(), cudaSuccess) << "braid invalidated another thread's global capture";
  // The calls ran: 3 sums of 1 + 2, each rank's buffer tripled twice more.
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(cudaStreamSynchronize(streams[r]), cudaSuccess);
    std::vector<float> got(kCount);
    ASSERT_EQ(cudaMemcpy(got.data(), bufs[r], kCount * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got[0], 3.0f * kRanks * kRanks) << "rank " << r;
    cudaFree(bufs[r]);
    cudaStreamDestroy(streams[r]);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, CaptureNeighbour, testing::Values("staged", "kernels"),
                         [](const testing::TestParamInfo<const char*>& p) { return std::string(p.param); });

}  // namespace
