// The plan interpreter's kernel (kernels/executor/plan_kernel.cu): the two
// ranks of an allreduce run as blocks of one launch, on device buffers, over
// FIFOs in device memory, with each protocol; the outputs must equal the host
// executor's arithmetic bit for bit (tests/executor/exec_harness.h). Skips
// without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/executor/lane_binding.h"
#include "kernels/executor/plan_kernel.h"
#include "reduce/host_reduce.h"
#include "tests/executor/exec_harness.h"
#include "tests/gpu/gpu_env.h"

namespace exectest {
namespace {

using namespace braid::exec;

struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceBuffer = std::unique_ptr<void, CudaFree>;

// Device allocations of one run, freed together.
class DeviceArena {
 public:
  template <class T = char>
  T* alloc(size_t bytes) {
    void* p = nullptr;
    if (bytes == 0) return nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
    buffers_.emplace_back(p);
    return static_cast<T*>(p);
  }
  template <class T>
  T* upload(const T* host, size_t n) {
    T* d = alloc<T>(n * sizeof(T));
    if (d != nullptr && cudaMemcpy(d, host, n * sizeof(T), cudaMemcpyHostToDevice) != cudaSuccess) return nullptr;
    return d;
  }

 private:
  std::vector<DeviceBuffer> buffers_;
};

// Runs every rank's plan in one launch, one block per lane; "" or an error.
std::string runOnDevice(const CollCase& c, Protocol proto, uint32_t nslots, const std::vector<braid::Plan>& plans,
                        std::vector<RankData>* data) {
  DeviceArena arena;
  const size_t esize = braid::typeSize(c.type);
  const uint64_t payload = uint64_t(c.chunkElems) * esize;
  const FifoLayout layout = fifoLayout(proto, nslots, payload);
  std::map<std::tuple<int, int, int>, char*> fifos;
  std::vector<char> image(layout.totalBytes);
  initFifoImage(image.data(), layout, 0);
  auto fifo = [&](int from, int to, int channel) -> FifoView {
    char*& f = fifos[std::make_tuple(from, to, channel)];
    if (f == nullptr) f = arena.upload(image.data(), image.size());
    return fifoViewAt(f, layout);
  };
  uint32_t* abortWord = arena.alloc<uint32_t>(sizeof(uint32_t));
  if (abortWord == nullptr || cudaMemset(abortWord, 0, sizeof(uint32_t)) != cudaSuccess) return "abort word";

  std::vector<LaneExec> lanes;
  std::vector<std::pair<char*, size_t>> outputs;  // device output per rank
  for (int r = 0; r < c.nranks; ++r) {
    RankData& d = (*data)[size_t(r)];
    char* out = arena.upload(reinterpret_cast<const char*>(d.output.data()), d.output.size());
    const char* in = c.inPlace ? out : arena.upload(reinterpret_cast<const char*>(d.input.data()), d.input.size());
    char* scratch = arena.upload(reinterpret_cast<const char*>(d.scratch.data()), d.scratch.size());
    outputs.emplace_back(out, d.output.size());
    for (const braid::Lane& lane : plans[size_t(r)].lanes) {
      BoundLane b;
      const std::string err = bindLane(lane, esize, payload, &b);
      if (!err.empty()) return err;
      std::vector<Port> sendPorts, recvPorts;
      for (int32_t peer : b.sendPeers) sendPorts.push_back(Port{fifo(r, peer, lane.channel), 0});
      for (int32_t peer : b.recvPeers) recvPorts.push_back(Port{fifo(peer, r, lane.channel), 0});
      LaneExec L;
      L.steps = arena.upload(b.steps.data(), b.steps.size());
      L.nsteps = uint32_t(b.steps.size());
      L.sendPorts = arena.upload(sendPorts.data(), sendPorts.size());
      L.nsendPorts = uint32_t(sendPorts.size());
      L.recvPorts = arena.upload(recvPorts.data(), recvPorts.size());
      L.nrecvPorts = uint32_t(recvPorts.size());
      L.input = in;
      L.output = out;
      L.scratch = scratch;
      L.stageBytes = (payload + 7) / 8 * 8;
      L.recvStage = arena.alloc<uint32_t>(L.stageBytes);
      L.sendStage = arena.alloc<uint32_t>(L.stageBytes);
      L.protocol = proto;
      L.op = braid::makeBuiltinOp(c.op, c.type, c.nranks);
      L.wait.abortFlag = abortWord;
      L.wait.maxPolls = uint64_t(1) << 24;  // a broken kernel ends instead of hanging
      lanes.push_back(L);
    }
  }
  LaneExec* dLanes = arena.upload(lanes.data(), lanes.size());
  int32_t* dStatus = arena.alloc<int32_t>(lanes.size() * sizeof(int32_t));
  if (dLanes == nullptr || dStatus == nullptr) return "device allocation failed";
  const braid::Result launched =
      braid::kernels::launchPlanLanes(c.type, dLanes, uint32_t(lanes.size()), 128, dStatus, nullptr);
  if (!launched.ok()) return launched.message();
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) return std::string("kernel failed: ") + cudaGetErrorString(err);
  std::vector<int32_t> status(lanes.size());
  if (cudaMemcpy(status.data(), dStatus, status.size() * sizeof(int32_t), cudaMemcpyDeviceToHost) != cudaSuccess)
    return "status copy failed";
  std::string failures;
  for (size_t i = 0; i < status.size(); ++i)
    if (status[i] != 0) failures += "lane " + std::to_string(i) + ": " + execStatusName(ExecStatus(status[i])) + "; ";
  if (!failures.empty()) return failures;
  for (int r = 0; r < c.nranks; ++r) {
    RankData& d = (*data)[size_t(r)];
    if (cudaMemcpy(d.output.data(), outputs[size_t(r)].first, d.output.size(), cudaMemcpyDeviceToHost) != cudaSuccess)
      return "output copy failed";
  }
  return "";
}

TEST(PlanKernel, RankPairAllReduceMatchesHost) {
  GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonHere());
  for (ncclDataType_t type : {ncclFloat32, ncclInt32}) {
    for (Protocol proto : {Protocol::Bulk, Protocol::LL}) {
      for (braid::Algorithm algo : {braid::Algorithm::Ring, braid::Algorithm::Tree}) {
        CollCase c;
        c.algorithm = algo;
        c.nranks = 2;
        c.count = 100003;
        c.chunkElems = 1021;
        c.nchannels = 2;
        c.type = type;
        c.op = type == ncclFloat32 ? ncclAvg : ncclSum;
        const auto plans = makePlans(c);
        auto want = makeData(c, plans, 21);
        auto got = want;
        ASSERT_EQ(runReference(c, plans, &want), "");
        ASSERT_EQ(runOnDevice(c, proto, 2, plans, &got), "") << describe(c);
        EXPECT_EQ(compareOutputs(c, want, got), "")
            << describe(c) << (proto == Protocol::LL ? " LL" : " bulk");
      }
    }
  }
}

}  // namespace
}  // namespace exectest
