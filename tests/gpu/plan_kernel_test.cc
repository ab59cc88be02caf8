// The plan interpreter's kernel (kernels/executor/plan_kernel.cu): the two
// ranks of an allreduce run as blocks of one launch, on device buffers, over
// FIFOs in device memory, with each protocol, for several datatypes (fp8 on
// sm_90+; refused below); the outputs must equal the reference's
// arithmetic bit for bit (tests/kernels/exec_harness.h). The GPU cases skip
// without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/executor/lane_binding.h"
#include "kernels/executor/plan_kernel.h"
#include "reduce/host_reduce.h"
#include "tests/gpu/gpu_env.h"
#include "tests/kernels/exec_harness.h"

namespace exectest {
namespace {

using namespace braid::executor;

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
  // The ports in device memory, and the device array of pointers to them
  // that a LaneExec holds.
  braid::executor::Port* const* uploadPorts(const std::vector<braid::executor::Port>& ports) {
    if (ports.empty()) return nullptr;
    braid::executor::Port* d = upload(ports.data(), ports.size());
    if (d == nullptr) return nullptr;
    std::vector<braid::executor::Port*> pointers;
    for (size_t i = 0; i < ports.size(); ++i) pointers.push_back(d + i);
    return upload(pointers.data(), pointers.size());
  }

 private:
  std::vector<DeviceBuffer> buffers_;
};

// The lanes' array, carried by the launch (launch_image.h) into device
// memory filled with 0xff: a block that read its lane before block 0 wrote
// it would run garbage.
braid::Result launchCarried(const CollCase& c, const std::vector<braid::executor::LaneExec>& lanes, int32_t* dStatus,
                            DeviceArena* arena) {
  const size_t bytes = lanes.size() * sizeof(braid::executor::LaneExec);
  if (bytes > braid::executor::LaunchImage::maxBytes())
    return braid::Result(ncclInternalError, "too many lanes to carry");
  auto* dLanes = arena->alloc<braid::executor::LaneExec>(bytes);
  auto* gate = arena->alloc<uint64_t>(sizeof(uint64_t));
  if (dLanes == nullptr || gate == nullptr || cudaMemset(dLanes, 0xff, bytes) != cudaSuccess ||
      cudaMemset(gate, 0, sizeof(uint64_t)) != cudaSuccess)
    return braid::Result(ncclInternalError, "device allocation failed");
  auto image = std::make_unique<braid::executor::LaunchImage>();
  memcpy(image->data, lanes.data(), bytes);
  image->words = uint32_t(bytes / sizeof(uint64_t));
  image->gate = gate;
  image->generation = 1;
  const bool fp8 = c.type == ncclFloat8e4m3 || c.type == ncclFloat8e5m2;
  braid::executor::PlanDevice dev;
  BRAID_TRY(braid::executor::queryPlanDevice(128, &dev));
  return braid::executor::launchPlanLanes(dev, dLanes, uint32_t(lanes.size()), 128, dStatus, fp8, nullptr,
                                          image.get());
}

// Runs every rank's plan in one launch, one block per lane; "" or an error.
// carried: the lanes' array travels in the launch's parameters.
std::string runOnDevice(const CollCase& c, braid::executor::Protocol proto, uint32_t nslots, const std::vector<braid::schedule::Plan>& plans,
                        std::vector<RankData>* data, bool carried = false) {
  DeviceArena arena;
  const size_t esize = braid::reduce::typeSize(c.type);
  const uint64_t payload = uint64_t(c.chunkElems) * esize;
  const braid::executor::FifoLayout layout = fifoLayout(proto, nslots, payload);
  std::map<std::tuple<int, int, int>, char*> fifos;
  std::vector<char> image(layout.totalBytes);
  initFifoImage(image.data(), layout, 0);
  auto fifo = [&](int from, int to, int channel) -> braid::executor::FifoView {
    char*& f = fifos[std::make_tuple(from, to, channel)];
    if (f == nullptr) f = arena.upload(image.data(), image.size());
    return fifoViewAt(f, layout);
  };
  uint32_t* abortWord = arena.alloc<uint32_t>(sizeof(uint32_t));
  if (abortWord == nullptr || cudaMemset(abortWord, 0, sizeof(uint32_t)) != cudaSuccess) return "abort word";

  std::vector<braid::executor::LaneExec> lanes;
  std::vector<std::pair<char*, size_t>> outputs;  // device output per rank
  for (int r = 0; r < c.nranks; ++r) {
    RankData& d = (*data)[size_t(r)];
    char* out = arena.upload(reinterpret_cast<const char*>(d.output.data()), d.output.size());
    const char* in = c.inPlace ? out : arena.upload(reinterpret_cast<const char*>(d.input.data()), d.input.size());
    char* scratch = arena.upload(reinterpret_cast<const char*>(d.scratch.data()), d.scratch.size());
    outputs.emplace_back(out, d.output.size());
    braid::executor::OpBuffers op;
    op.input = in;
    op.output = out;
    op.scratch = scratch;
    op.op = braid::reduce::makeBuiltinOp(c.op, c.type, c.nranks);
    const braid::executor::OpBuffers* dOp = arena.upload(&op, 1);
    if (dOp == nullptr) return "device allocation failed";
    for (const braid::schedule::Lane& lane : plans[size_t(r)].lanes) {
      braid::executor::BoundLane b;
      const std::string err = bindLane(lane, proto, esize, payload, &b);
      if (!err.empty()) return err;
      std::vector<braid::executor::Port> sendPorts, recvPorts;
      for (int32_t peer : b.sendPeers) sendPorts.push_back(braid::executor::Port{fifo(r, peer, lane.channel), 0});
      for (int32_t peer : b.recvPeers) recvPorts.push_back(braid::executor::Port{fifo(peer, r, lane.channel), 0});
      braid::executor::LaneExec L;
      L.steps = arena.upload(b.steps.data(), b.steps.size());
      L.nsteps = uint32_t(b.steps.size());
      L.sendPorts = arena.uploadPorts(sendPorts);
      L.nsendPorts = uint32_t(sendPorts.size());
      L.recvPorts = arena.uploadPorts(recvPorts);
      L.nrecvPorts = uint32_t(recvPorts.size());
      L.ops = dOp;
      L.nops = 1;
      L.stageBytes = (payload + 7) / 8 * 8;
      L.recvStage = arena.alloc<uint32_t>(L.stageBytes);
      L.sendStage = arena.alloc<uint32_t>(L.stageBytes);
      L.wait.abortFlag = abortWord;
      L.wait.maxPolls = uint64_t(1) << 24;  // a broken kernel ends instead of hanging
      lanes.push_back(L);
    }
  }
  int32_t* dStatus = arena.alloc<int32_t>(lanes.size() * sizeof(int32_t));
  if (dStatus == nullptr) return "device allocation failed";
  braid::executor::LaneExec* dLanes = carried ? nullptr : arena.upload(lanes.data(), lanes.size());
  if (!carried && dLanes == nullptr) return "device allocation failed";
  const braid::Result launched =
      carried ? launchCarried(c, lanes, dStatus, &arena)
              : braid::executor::launchPlanLanes(c.type, dLanes, uint32_t(lanes.size()), 128, dStatus, nullptr);
  if (!launched.ok()) return launched.message();
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) return std::string("kernel failed: ") + cudaGetErrorString(err);
  std::vector<int32_t> status(lanes.size());
  if (cudaMemcpy(status.data(), dStatus, status.size() * sizeof(int32_t), cudaMemcpyDeviceToHost) != cudaSuccess)
    return "status copy failed";
  std::string failures;
  for (size_t i = 0; i < status.size(); ++i)
    if (status[i] != 0) failures += "lane " + std::to_string(i) + ": " + execStatusName(braid::executor::ExecStatus(status[i])) + "; ";
  if (!failures.empty()) return failures;
  for (int r = 0; r < c.nranks; ++r) {
    RankData& d = (*data)[size_t(r)];
    if (cudaMemcpy(d.output.data(), outputs[size_t(r)].first, d.output.size(), cudaMemcpyDeviceToHost) != cudaSuccess)
      return "output copy failed";
  }
  return "";
}

CollCase rankPair(braid::schedule::Algorithm algo, ncclDataType_t type, ncclRedOp_t op) {
  CollCase c;
  c.algorithm = algo;
  c.nranks = 2;
  c.count = 100003;
  c.chunkElems = 1021;
  c.nchannels = 2;
  c.type = type;
  c.op = op;
  return c;
}

// Both protocols, ring and tree, each against the host reference.
void expectRankPairMatchesHost(ncclDataType_t type, ncclRedOp_t op, bool carried = false) {
  for (braid::executor::Protocol proto : {braid::executor::Protocol::Bulk, braid::executor::Protocol::LL}) {
    for (braid::schedule::Algorithm algo : {braid::schedule::Algorithm::Ring, braid::schedule::Algorithm::Tree}) {
      const CollCase c = rankPair(algo, type, op);
      const auto plans = makePlans(c);
      auto want = makeData(c, plans, 21);
      auto got = want;
      ASSERT_EQ(runReference(c, plans, &want), "");
      ASSERT_EQ(runOnDevice(c, proto, 2, plans, &got, carried), "") << describe(c) << (proto == braid::executor::Protocol::LL ? " LL" : " bulk");
      EXPECT_EQ(compareOutputs(c, want, got), "") << describe(c) << (proto == braid::executor::Protocol::LL ? " LL" : " bulk");
    }
  }
}

int computeCapabilityMajor() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return -1;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return -1;
  return major;
}

// No CUDA call: type support and argument checks are host decisions.
TEST(PlanKernel, SupportsEveryDatatype) {
  for (int t = 0; t < ncclNumTypes; ++t) EXPECT_TRUE(braid::executor::planKernelSupportsType(ncclDataType_t(t))) << t;
  EXPECT_FALSE(braid::executor::planKernelSupportsType(ncclNumTypes));
  const braid::Result r = braid::executor::launchPlanLanes(ncclNumTypes, nullptr, 1, 32, nullptr, nullptr);
  EXPECT_EQ(r.code(), ncclInvalidArgument);
  EXPECT_NE(r.message().find("invalid datatype"), std::string::npos) << r.message();
  const braid::Result threads = braid::executor::launchPlanLanes(ncclFloat32, nullptr, 1, 0, nullptr, nullptr);
  EXPECT_EQ(threads.code(), ncclInvalidArgument);
}

TEST(PlanKernel, RankPairAllReduceMatchesHost) {
  GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonHere());
  expectRankPairMatchesHost(ncclFloat32, ncclAvg);
  expectRankPairMatchesHost(ncclInt32, ncclSum);
}

// The lanes written by block 0 from the launch's parameters, the other
// blocks waiting at the gate (kernels/executor/launch_image.h).
TEST(PlanKernel, LanesCarriedByTheLaunchMatchHost) {
  GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonHere());
  expectRankPairMatchesHost(ncclFloat32, ncclSum, true);
}

TEST(PlanKernel, MoreDatatypesMatchHost) {
  GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonHere());
  expectRankPairMatchesHost(ncclFloat16, ncclSum);
  expectRankPairMatchesHost(ncclBfloat16, ncclAvg);
  expectRankPairMatchesHost(ncclInt64, ncclMax);
  expectRankPairMatchesHost(ncclUint8, ncclProd);
  expectRankPairMatchesHost(ncclFloat64, ncclMin);
}

// fp8 runs on sm_90+ only; older devices get a clear refusal before launch.
TEST(PlanKernel, Fp8OnSm90OrRefused) {
  GPU_REQUIRE_OR_SKIP(gputest::noGpuReasonHere());
  const int major = computeCapabilityMajor();
  ASSERT_GT(major, 0) << "compute capability query failed";
  if (major >= 9) {
    expectRankPairMatchesHost(ncclFloat8e4m3, ncclSum);
    expectRankPairMatchesHost(ncclFloat8e5m2, ncclMax);
    return;
  }
  const CollCase c = rankPair(braid::schedule::Algorithm::Ring, ncclFloat8e4m3, ncclSum);
  const auto plans = makePlans(c);
  auto got = makeData(c, plans, 21);
  const std::string err = runOnDevice(c, braid::executor::Protocol::Bulk, 2, plans, &got);
  EXPECT_NE(err.find("compute capability 9.0"), std::string::npos) << err;
}

}  // namespace
}  // namespace exectest
