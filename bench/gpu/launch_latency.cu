// Where an 8-byte allreduce's time goes on one GPU (issue 17: 10 us per call
// without CUDA graphs): N ranks of one process on device 0, driven by one
// thread (ncclCommInitAll, a group of N calls, as nccl-tests' -g N), float32
// sum out of place, against the floor of N empty kernels on the same streams.
// Per call, in microseconds:
//   enqueue        host time of ncclGroupStart .. ncclGroupEnd (the host work
//                  on the critical path: planning, image, events, launch)
//   back-to-back   wall time of `iters` calls issued without waiting, then a
//                  synchronisation (what all_reduce_perf reports)
//   synced         wall time of one call and its synchronisation
//   graph          wall time per call of a CUDA graph of 100 calls (one
//                  graph for all ranks, captured in thread-local mode),
//                  launched iters/100 times back to back (captured as plan
//                  kernels under BRAID_GRAPH_ENGINE=kernels, else staged)
// Run by tests/gpu/run.sh; fails (exit 1) only on an error or a wrong sum.
// The graph's sums are checked too.
//   launch_latency [iters]     (default 500)
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

double nowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

__global__ void emptyKernel() {}

bool cudaOk(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "launch_latency: %s: %s\n", what, cudaGetErrorString(err));
  return false;
}

struct Ranks {
  int n;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  std::vector<float*> send, recv;

  explicit Ranks(int count) : n(count), comms(count), streams(count), send(count), recv(count) {}
  ~Ranks() {
    for (int r = 0; r < n; ++r) {
      if (comms[r]) ncclCommDestroy(comms[r]);
      if (streams[r]) cudaStreamDestroy(streams[r]);
      cudaFree(send[r]);
      cudaFree(recv[r]);
    }
  }
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;

  bool init() {
    std::vector<int> devices(n, 0);
    if (ncclCommInitAll(comms.data(), n, devices.data()) != ncclSuccess) {
      std::fprintf(stderr, "launch_latency: ncclCommInitAll(%d): %s\n", n, ncclGetLastError(nullptr));
      return false;
    }
    for (int r = 0; r < n; ++r) {
      const float mine[2] = {float(r + 1), float(r + 1)};
      if (!cudaOk(cudaStreamCreateWithFlags(&streams[r], cudaStreamNonBlocking), "cudaStreamCreate") ||
          !cudaOk(cudaMalloc(&send[r], sizeof mine), "cudaMalloc") ||
          !cudaOk(cudaMalloc(&recv[r], sizeof mine), "cudaMalloc") ||
          !cudaOk(cudaMemcpy(send[r], mine, sizeof mine, cudaMemcpyHostToDevice), "cudaMemcpy"))
        return false;
    }
    return true;
  }
  bool call() {
    ncclGroupStart();
    for (int r = 0; r < n; ++r) ncclAllReduce(send[r], recv[r], 2, ncclFloat32, ncclSum, comms[r], streams[r]);
    if (ncclGroupEnd() == ncclSuccess) return true;
    std::fprintf(stderr, "launch_latency: allreduce on %d ranks: %s\n", n, ncclGetLastError(nullptr));
    return false;
  }
  bool sync() {
    for (int r = 0; r < n; ++r)
      if (!cudaOk(cudaStreamSynchronize(streams[r]), "cudaStreamSynchronize")) return false;
    return true;
  }
  // Captures `calls` calls of every rank into one graph: stream 0 captures,
  // the others join it through events.
  bool capture(int calls, cudaGraphExec_t* exec) {
    std::vector<cudaEvent_t> events(n);
    for (cudaEvent_t& e : events)
      if (!cudaOk(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate")) return false;
    bool ok = cudaOk(cudaStreamBeginCapture(streams[0], cudaStreamCaptureModeThreadLocal), "begin capture") &&
              cudaOk(cudaEventRecord(events[0], streams[0]), "fork");
    for (int r = 1; ok && r < n; ++r) ok = cudaOk(cudaStreamWaitEvent(streams[r], events[0], 0), "fork wait");
    for (int i = 0; ok && i < calls; ++i) ok = call();
    for (int r = 1; r < n; ++r)  // rejoin even after a failure, so that the capture can end
      if (cudaEventRecord(events[r], streams[r]) == cudaSuccess) cudaStreamWaitEvent(streams[0], events[r], 0);
    cudaGraph_t graph = nullptr;
    ok = cudaOk(cudaStreamEndCapture(streams[0], &graph), "end capture") && ok;
    if (ok) ok = cudaOk(cudaGraphInstantiateWithFlags(exec, graph, 0), "instantiate");
    if (graph) cudaGraphDestroy(graph);
    for (cudaEvent_t e : events) cudaEventDestroy(e);
    return ok;
  }
  bool sumsRight() {
    const float want = float(n * (n + 1) / 2);
    for (int r = 0; r < n; ++r) {
      float got[2] = {};
      if (!cudaOk(cudaMemcpy(got, recv[r], sizeof got, cudaMemcpyDeviceToHost), "cudaMemcpy")) return false;
      if (got[0] != want || got[1] != want) {
        std::fprintf(stderr, "launch_latency: %d ranks: rank %d got %g, %g; want %g\n", n, r, double(got[0]),
                     double(got[1]), double(want));
        return false;
      }
    }
    return true;
  }
};

// The floor: N empty kernels a step, one per stream.
bool emptyKernels(Ranks& ranks, int iters, double* enqueue, double* backToBack) {
  const double t0 = nowUs();
  for (int i = 0; i < iters; ++i)
    for (int r = 0; r < ranks.n; ++r) emptyKernel<<<1, 32, 0, ranks.streams[r]>>>();
  const double t1 = nowUs();
  if (!cudaOk(cudaGetLastError(), "empty kernel") || !ranks.sync()) return false;
  *enqueue = (t1 - t0) / iters;
  *backToBack = (nowUs() - t0) / iters;
  return true;
}

bool allreduces(Ranks& ranks, int iters, double* enqueue, double* backToBack, double* synced) {
  double inCalls = 0;
  const double t0 = nowUs();
  for (int i = 0; i < iters; ++i) {
    const double a = nowUs();
    if (!ranks.call()) return false;
    inCalls += nowUs() - a;
  }
  if (!ranks.sync()) return false;
  *backToBack = (nowUs() - t0) / iters;
  *enqueue = inCalls / iters;
  const int syncedIters = iters / 5 > 0 ? iters / 5 : 1;
  const double t2 = nowUs();
  for (int i = 0; i < syncedIters; ++i)
    if (!ranks.call() || !ranks.sync()) return false;
  *synced = (nowUs() - t2) / syncedIters;
  return ranks.sumsRight();
}

// Per call: `launches` launches of a graph of `calls` calls, back to back.
bool graphed(Ranks& ranks, int calls, int launches, double* perCall) {
  cudaGraphExec_t exec = nullptr;
  if (!ranks.capture(calls, &exec)) return false;
  bool ok = cudaOk(cudaGraphLaunch(exec, ranks.streams[0]), "graph launch") && ranks.sync();  // warm-up
  const double t0 = nowUs();
  for (int i = 0; ok && i < launches; ++i) ok = cudaOk(cudaGraphLaunch(exec, ranks.streams[0]), "graph launch");
  ok = ok && ranks.sync();
  *perCall = (nowUs() - t0) / (double(launches) * calls);
  cudaGraphExecDestroy(exec);
  return ok && ranks.sumsRight();
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 500;
  if (iters <= 0) {
    std::fprintf(stderr, "usage: launch_latency [iters > 0]\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("launch_latency: no GPU: nothing measured\n");
    return 0;
  }
  const char* graphEngine = std::getenv("BRAID_GRAPH_ENGINE");
  std::printf("# 8 B float32 allreduce, N ranks on device 0 from one thread; us per call (%d calls; graph: "
              "BRAID_GRAPH_ENGINE=%s)\n", iters, graphEngine ? graphEngine : "(unset)");
  std::printf("# %5s %12s %14s %10s %10s   %18s %22s\n", "ranks", "enqueue", "back-to-back", "synced", "graph",
              "empty kernels: enq", "empty kernels: b2b");
  for (int n : {1, 2, 4}) {
    Ranks ranks(n);
    double kEnq = 0, kB2b = 0, enq = 0, b2b = 0, synced = 0, graph = 0;
    if (!ranks.init() || !emptyKernels(ranks, iters, &kEnq, &kB2b)) return 1;
    // Warm-up: the first calls plan, connect and fill the caches.
    for (int i = 0; i < 20; ++i)
      if (!ranks.call()) return 1;
    if (!ranks.sync()) return 1;
    if (!allreduces(ranks, iters, &enq, &b2b, &synced)) return 1;
    constexpr int kGraphCalls = 100;
    if (!graphed(ranks, kGraphCalls, iters / kGraphCalls > 0 ? iters / kGraphCalls : 1, &graph)) return 1;
    std::printf("  %5d %12.2f %14.2f %10.2f %10.2f   %18.2f %22.2f\n", n, enq, b2b, synced, graph, kEnq, kB2b);
  }
  return 0;
}
