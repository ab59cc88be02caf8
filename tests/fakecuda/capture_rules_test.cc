// The fake runtime's stream capture (fake_capture.h), rule by rule, against
// what CUDA does: tests/gpu's graph tests run on it in CI (fakecuda.graphs_*),
// so each rule that makes a wrong use fail on a GPU must fail here too.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Stream {
  cudaStream_t s = nullptr;
  explicit Stream(unsigned flags = cudaStreamNonBlocking) { EXPECT_EQ(cudaStreamCreateWithFlags(&s, flags), cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s); }
};

struct Event {
  cudaEvent_t e = nullptr;
  Event() { EXPECT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess); }
  ~Event() { cudaEventDestroy(e); }
};

void CUDART_CB increment(void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); }

// A host function that holds its stream until the flag is set (at most 10 s:
// a test that would hang fails instead).
struct Gate {
  std::atomic<int> open{0};
  std::atomic<int> timedOut{0};
  static void CUDART_CB wait(void* p) {
    Gate* g = static_cast<Gate*>(p);
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (g->open.load() == 0)
      if (Clock::now() > until) return void(g->timedOut.store(1));
  }
  static void CUDART_CB set(void* p) { static_cast<Gate*>(p)->open.store(1); }
};

cudaStreamCaptureStatus statusOf(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  EXPECT_EQ(cudaStreamIsCapturing(s, &st), cudaSuccess);
  return st;
}

// Ends the capture of `s` expecting `want`; the graph, if one came, is destroyed.
void endExpecting(cudaStream_t s, cudaError_t want) {
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(s, &g), want);
  if (g) cudaGraphDestroy(g);
  (void)cudaGetLastError();
  EXPECT_EQ(statusOf(s), cudaStreamCaptureStatusNone);
}

TEST(CaptureRules, CapturedWorkRunsAtEachLaunchAndNotBefore) {
  Stream st;
  std::atomic<int> runs{0};
  int* value = nullptr;
  int* dev = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&value), sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), sizeof(int)), cudaSuccess);
  *value = 7;
  ASSERT_EQ(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(statusOf(st.s), cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaLaunchHostFunc(st.s, increment, &runs), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(dev, value, sizeof(int), cudaMemcpyHostToDevice, st.s), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(st.s, &graph), cudaSuccess);
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(runs.load(), 0) << "captured work ran at capture";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, 0), cudaSuccess);
  for (int k = 1; k <= 3; ++k) {
    *value = 100 + k;  // a copy node reads its source when it runs
    ASSERT_EQ(cudaGraphLaunch(exec, st.s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
    EXPECT_EQ(runs.load(), k);
    int got = 0;
    ASSERT_EQ(cudaMemcpy(&got, dev, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(got, 100 + k);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFree(dev);
  cudaFreeHost(value);
}

// Streams joined to a capture are branches of the graph, which run at once:
// one branch's host function waits for the other's (run one after the other,
// the first would wait for ever).
TEST(CaptureRules, ForkedBranchesRunAtOnce) {
  Stream origin, other;
  Event fork, join;
  Gate gate;
  ASSERT_EQ(cudaStreamBeginCapture(origin.s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork.e, origin.s), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(other.s, fork.e, 0), cudaSuccess);
  EXPECT_EQ(statusOf(other.s), cudaStreamCaptureStatusActive) << "a wait on a captured event joins the capture";
  ASSERT_EQ(cudaLaunchHostFunc(origin.s, Gate::wait, &gate), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(other.s, Gate::set, &gate), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(join.e, other.s), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(origin.s, join.e, 0), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(origin.s, &graph), cudaSuccess);
  EXPECT_EQ(statusOf(other.s), cudaStreamCaptureStatusNone) << "the end releases every joined stream";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, origin.s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(origin.s), cudaSuccess);
  EXPECT_EQ(gate.timedOut.load(), 0) << "the branches ran one after the other";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST(CaptureRules, AJoinedStreamThatDidNotRejoinFailsTheEnd) {
  Stream origin, other;
  Event fork;
  std::atomic<int> runs{0};
  ASSERT_EQ(cudaStreamBeginCapture(origin.s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork.e, origin.s), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(other.s, fork.e, 0), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(other.s, increment, &runs), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(other.s, nullptr), cudaErrorInvalidValue);
  cudaGraph_t g = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(other.s, &g), cudaErrorStreamCaptureUnmatched) << "only the origin ends it";
  (void)cudaGetLastError();
  endExpecting(origin.s, cudaErrorStreamCaptureUnjoined);
  EXPECT_EQ(statusOf(other.s), cudaStreamCaptureStatusNone);
  EXPECT_EQ(runs.load(), 0);
}

TEST(CaptureRules, SynchronisingACapturingStreamInvalidatesTheCapture) {
  Stream st;
  int* dev = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), 64), cudaSuccess);
  for (int how = 0; how < 2; ++how) {
    ASSERT_EQ(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal), cudaSuccess);
    EXPECT_EQ(how == 0 ? cudaStreamSynchronize(st.s) : cudaStreamQuery(st.s), cudaErrorStreamCaptureUnsupported);
    EXPECT_EQ(statusOf(st.s), cudaStreamCaptureStatusInvalidated);
    EXPECT_EQ(cudaMemsetAsync(dev, 0, 64, st.s), cudaErrorStreamCaptureInvalidated) << "later captured work fails";
    endExpecting(st.s, cudaErrorStreamCaptureInvalidated);
  }
  // The stream works again once the capture ended.
  EXPECT_EQ(cudaMemsetAsync(dev, 0, 64, st.s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  cudaFree(dev);
}

// An unsafe call by this thread or another in `threadMode`.
template <class Call>
cudaError_t unsafeCallOn(bool otherThread, cudaStreamCaptureMode threadMode, Call unsafe) {
  cudaError_t err = cudaSuccess;
  auto call = [&] {
    cudaStreamCaptureMode mode = threadMode;
    cudaThreadExchangeStreamCaptureMode(&mode);
    err = unsafe();
    (void)cudaGetLastError();
    cudaThreadExchangeStreamCaptureMode(&mode);
  };
  if (otherThread) {
    std::thread t(call);
    t.join();
  } else {
    call();
  }
  return err;
}

// Allocations, and queries and synchronisations of other streams and of
// events (a watchdog thread's cudaEventQuery during a global capture is the
// classic), each in every capture mode and thread mode; the capture survives
// exactly the calls it allowed.
TEST(CaptureRules, UnsafeCallsAreRefusedWhereTheThreadsModeSays) {
  Stream st, other;
  Event done;
  ASSERT_EQ(cudaEventRecord(done.e, other.s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(other.s), cudaSuccess);
  const std::vector<std::pair<const char*, std::function<cudaError_t()>>> calls = {
      {"cudaMalloc",
       [] {
         void* p = nullptr;
         const cudaError_t err = cudaMalloc(&p, 16);
         if (p) cudaFree(p);
         return err;
       }},
      {"cudaEventQuery", [&] { return cudaEventQuery(done.e); }},
      {"cudaStreamSynchronize of another stream", [&] { return cudaStreamSynchronize(other.s); }},
  };
  struct Case {
    cudaStreamCaptureMode capture;
    bool otherThread;
    cudaStreamCaptureMode threadMode;
    bool refused;
  } cases[] = {
      {cudaStreamCaptureModeGlobal, false, cudaStreamCaptureModeGlobal, true},
      {cudaStreamCaptureModeGlobal, true, cudaStreamCaptureModeGlobal, true},
      {cudaStreamCaptureModeGlobal, true, cudaStreamCaptureModeThreadLocal, false},
      {cudaStreamCaptureModeGlobal, true, cudaStreamCaptureModeRelaxed, false},
      {cudaStreamCaptureModeGlobal, false, cudaStreamCaptureModeRelaxed, false},
      {cudaStreamCaptureModeThreadLocal, false, cudaStreamCaptureModeGlobal, true},
      {cudaStreamCaptureModeThreadLocal, true, cudaStreamCaptureModeGlobal, false},
      {cudaStreamCaptureModeRelaxed, false, cudaStreamCaptureModeGlobal, false},
  };
  for (const auto& [name, call] : calls)
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(name) + ", capture mode " + std::to_string(int(c.capture)) +
                   (c.otherThread ? ", another thread" : ", this thread") + " in mode " +
                   std::to_string(int(c.threadMode)));
      ASSERT_EQ(cudaStreamBeginCapture(st.s, c.capture), cudaSuccess);
      EXPECT_EQ(unsafeCallOn(c.otherThread, c.threadMode, call),
                c.refused ? cudaErrorStreamCaptureUnsupported : cudaSuccess);
      endExpecting(st.s, c.refused ? cudaErrorStreamCaptureInvalidated : cudaSuccess);
    }
}

TEST(CaptureRules, TheLegacyStreamWhileABlockingStreamCapturesIsImplicit) {
  Stream blocking(cudaStreamDefault), nonBlocking;
  int* dev = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), 64), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(nonBlocking.s, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(dev, 0, 64, nullptr), cudaSuccess) << "a non-blocking capture leaves it alone";
  endExpecting(nonBlocking.s, cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(blocking.s, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  EXPECT_EQ(cudaStreamIsCapturing(nullptr, &st), cudaErrorStreamCaptureImplicit);
  EXPECT_EQ(cudaMemsetAsync(dev, 0, 64, nullptr), cudaErrorStreamCaptureImplicit);
  endExpecting(blocking.s, cudaErrorStreamCaptureInvalidated);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(dev);
}

TEST(CaptureRules, WaitingOnWorkOutsideTheCaptureIsIsolation) {
  Stream capturing, outside;
  Event pending, done;
  Gate gate;
  ASSERT_EQ(cudaEventRecord(done.e, outside.s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(outside.s), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(outside.s, Gate::wait, &gate), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(pending.e, outside.s), cudaSuccess);
  for (cudaEvent_t e : {done.e, pending.e}) {
    ASSERT_EQ(cudaStreamBeginCapture(capturing.s, cudaStreamCaptureModeGlobal), cudaSuccess);
    EXPECT_EQ(cudaStreamWaitEvent(capturing.s, e, 0), cudaErrorStreamCaptureIsolation) << "done or not";
    endExpecting(capturing.s, cudaErrorStreamCaptureInvalidated);
  }
  // An event recorded in a capture is no event to query.
  ASSERT_EQ(cudaStreamBeginCapture(capturing.s, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(done.e, capturing.s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done.e), cudaErrorStreamCaptureUnsupported);
  endExpecting(capturing.s, cudaErrorStreamCaptureInvalidated);
  gate.open.store(1);
  ASSERT_EQ(cudaStreamSynchronize(outside.s), cudaSuccess);
}

// A user object's destructor runs once the graph, every executable graph made
// from it and their launches are done with it, on a thread of the runtime's.
TEST(CaptureRules, AUserObjectLivesUntilItsGraphsAndTheirLaunchesAreGone) {
  Stream st;
  Gate gate;
  std::atomic<int> destroyed{0};
  cudaUserObject_t object = nullptr;
  ASSERT_EQ(cudaUserObjectCreate(&object, &destroyed, increment, 1, 0), cudaErrorInvalidValue)
      << "CUDA requires cudaUserObjectNoDestructorSync";
  ASSERT_EQ(cudaUserObjectCreate(&object, &destroyed, increment, 1, cudaUserObjectNoDestructorSync), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(st.s, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t capturing = nullptr;
  ASSERT_EQ(cudaStreamGetCaptureInfo(st.s, &status, nullptr, &capturing, nullptr, nullptr, nullptr), cudaSuccess);
  ASSERT_EQ(status, cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaGraphRetainUserObject(capturing, object, 1, cudaGraphUserObjectMove), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(st.s, Gate::wait, &gate), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(st.s, &graph), cudaSuccess);
  ASSERT_EQ(graph, capturing);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, st.s), cudaSuccess);
  ASSERT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(destroyed.load(), 0) << "released while a launch still runs";
  gate.open.store(1);
  ASSERT_EQ(cudaStreamSynchronize(st.s), cudaSuccess);
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (destroyed.load() == 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(destroyed.load(), 1);
  EXPECT_EQ(gate.timedOut.load(), 0);
}

}  // namespace
