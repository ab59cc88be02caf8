// The communicator: what a rank knows about its job, and the connections it has
// made so far. `struct ncclComm` is the type behind the API's ncclComm_t.
#pragma once

#include <nccl.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "base/wait_policy.h"
#include "bootstrap/bootstrap.h"
#include "engine/presence_board.h"
#include "engine/task.h"
#include "reduce/host_reduce.h"
#include "schedule/rank_order.h"
#include "transports/transport.h"
#include "tuning/algo_env.h"
#include "tuning/calibration.h"
#include "tuning/cost_model.h"

namespace braid::engine {

// Settings fixed at init from the environment and the user's ncclConfig_t.
struct CommSettings {
  bool blocking = true;
  size_t slotBytes = 512 * 1024;  // one FIFO slot = the largest step
  size_t peerSlotBytes = 512 * 1024;  // the same for per-peer FIFOs (set at init from the rank count)
  int nslots = 8;
  int nchannels = 1;
  // BRAID_NCHANNELS sets the channels of every call; else plan kernels choose
  // theirs per call (tuning/device_channels.h), at most ncclConfig_t::maxCTAs
  // (0: unset).
  bool nchannelsFixed = false;
  int maxCtas = 0;
  // BRAID_DEVICE_FIFO_ARENA: device memory made at creation for the plan
  // kernels' FIFOs with ranks of this process.
  size_t deviceFifoArenaBytes = size_t(128) << 20;  // 16 channels' FIFOs (tuning/device_channels.h)
  // BRAID_LANE_BEACONS: the plan kernels' lane beacons (40 bytes of mapped
  // pinned memory each) made at creation; a launch takes one a lane, plus one.
  size_t laneBeacons = 16384;
  double timeoutSeconds = 600;
  WaitPolicy wait;  // spinPolls set at init from ranks per core
  bool checkCalls = false;  // BRAID_CHECK=1: ranks compare their collectives before running them
  // BRAID_DEVICE_ENGINE=kernels (the default): device buffers of
  // communicators whose ranks share a host run as plan kernels where they
  // can (engine/device/cuda_device_path.cc says where not); staged: through
  // pinned memory, run by the host runner.
  bool deviceKernels = true;
  // BRAID_GRAPH_ENGINE=kernels: a group a CUDA graph captures whole (every
  // call's stream in one capture) runs as plan kernels too, each launch of
  // the graph watched (engine/device/cuda_lane_launch.cc); staged (the
  // default until tests/gpu/run.sh has passed it on a GPU): staged.
  bool graphKernels = false;
  // BRAID_MULTIHOST_ENGINE=kernels: communicators with ranks on other hosts
  // run their device calls as plan kernels too, FIFOs with those ranks in
  // mapped pinned memory and bridged over the network by a pump thread
  // (engine/lanes/bridge_pump.h); staged (the default until tests/gpu/run.sh
  // has passed it on a GPU): staged.
  bool bridgedKernels = false;
  // CUDA_LAUNCH_BLOCKING=1 (CUDA's own variable): a launch returns only once
  // its kernel ended, so nothing a kernel waits for may come after a launch
  // in the launching thread, nor from a CUDA call of another thread.
  bool launchesBlock = false;
  // BRAID_REPRODUCIBLE=1 or braidCommSetReproducible: floating-point sums and
  // averages whose bits do not depend on the algorithm (core/reproducible.h).
  bool reproducible = false;
  // BRAID_WIRE_TYPE or braidCommSetWireType: float32 sums travel narrowed
  // (engine/task_plan.h wireTypeFor, src/reduce/wire_format.h).
  reduce::WireType wireType = reduce::WireType::None;
  std::string name;
};

// A user-defined reduction (ncclRedOpCreatePreMulSum).
struct UserRedOp {
  bool live = false;
  ncclDataType_t type = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  alignas(8) uint8_t scalar[8] = {};  // HostImmediate: the value
  const void* scalarPtr = nullptr;    // Device residence: read when the op runs
};

struct ConnectionKey {
  int peer;
  int channel;
  bool operator<(const ConnectionKey& o) const {
    return peer != o.peer ? peer < o.peer : channel < o.channel;
  }
};

enum class CommState { Initializing, Ready, Failed, Finalized, Aborted };

}  // namespace braid::engine

// The engines' state, owned by the communicator and defined by each engine
// (engine/lanes/host_lanes.h, engine/device/cuda_proxy.h), so that what every
// engine shares does not depend on any one of them.

namespace braid::device {
class DeviceProxy;
struct DeviceProxyDeleter {
  void operator()(DeviceProxy* proxy) const;
};
}  // namespace braid::device

namespace braid::lanes {
struct HostLanes;
struct HostLanesDeleter {
  void operator()(HostLanes* lanes) const;
};
}  // namespace braid::lanes

struct ncclComm {
  int rank = -1;
  int nranks = 0;
  int cudaDev = -1;
  // BRAID_DEVICE_ENGINE=kernels: why this rank's plan kernels would only take
  // turns with another process's on its GPU (engine/device/launch_plan.h:
  // timeSlicedPeers), so its device calls take the staged path; empty: none.
  std::string timeSlicedGpu;
  braid::engine::CommSettings settings;
  // The most channels a plan kernel of this communicator uses (alike on
  // every rank: tuning/device_channels.h).
  int deviceChannelCap = 1;
  // The same for PeerAccess plans, which need no FIFOs (not limited by the arena).
  int peerAccessChannelCap = 1;

  std::unique_ptr<braid::bootstrap::Bootstrap> bootstrap;
  std::vector<braid::PeerInfo> peers;
  // Which ranks of this host run now (base/presence.h): made at init.
  braid::engine::PresenceBoard presence;
  std::vector<std::unique_ptr<braid::transports::Transport>> transports;
  std::map<braid::engine::ConnectionKey, std::unique_ptr<braid::transports::SendConnection>> sendConns;
  std::map<braid::engine::ConnectionKey, std::unique_ptr<braid::transports::RecvConnection>> recvConns;
  std::vector<braid::engine::UserRedOp> userOps;

  // What the planner needs; identical on every rank so that all choose alike.
  braid::tuning::TransportClass transportClass = braid::tuning::TransportClass::SharedMemory;
  braid::tuning::CalibrationParams calibration{};  // rank 0's, agreed at init
  braid::tuning::AlgoFilter algoFilter;            // NCCL_ALGO / NCCL_PROTO at init
  braid::schedule::RankOrder ringOrder;            // positions in rings and trees: hosts contiguous

  uint64_t opCount = 0;  // calls issued, for diagnosis
  // What calls are numbered by for their fingerprints (engine/fingerprint.h):
  // collectives so far; sends to and receives from each peer so far.
  uint64_t collectivesRun = 0;
  std::vector<uint64_t> sendsTo, recvsFrom;
  // The last calls, call `sequence` at sequence % 16 (engine/call_probe.h).
  std::array<braid::engine::RecentCall, 16> recentCalls;
  // Reproducible mode's integer buffers (core/reproducible.h), kept between
  // calls: fresh pages for every call cost more than the conversions.
  std::vector<int64_t> reproducibleScratch;
  uint64_t collectivesChecked = 0;  // collectives compared under BRAID_CHECK
  std::atomic<int> state{static_cast<int>(braid::engine::CommState::Initializing)};
  std::atomic<ncclResult_t> asyncError{ncclInProgress};
  // Set by ncclCommAbort (and a failed init); every wait polls it. Lanes
  // read it through executor::WaitControl::abortFlag as a plain word.
  std::atomic<uint32_t> abortFlag{0};
  std::atomic<int> activeCalls{0};  // groups running on this communicator (see ncclCommAbort)
  std::thread initThread;  // nonblocking init runs here
  std::string initError;   // message of a failed nonblocking init
  // What put the communicator in error (the first failure): written by
  // setCommError from any thread (a device watch, a CUDA callback), read
  // through failureText().
  std::string failure;
  mutable std::mutex failureMu;
  std::string failureText() const {
    std::lock_guard<std::mutex> lock(failureMu);
    return failure;
  }

  // Each engine's own state. The host runner's FIFOs, ports, cached plans and
  // scratch, made by the first group on host buffers:
  std::unique_ptr<braid::lanes::HostLanes, braid::lanes::HostLanesDeleter> hostLanes;

  // Device buffers: the proxy thread and staging memory, made by the first call
  // on device buffers. Last, so that it stops before the connections go.
  std::unique_ptr<braid::device::DeviceProxy, braid::device::DeviceProxyDeleter> deviceProxy;

  braid::engine::CommState currentState() const { return static_cast<braid::engine::CommState>(state.load()); }
};

namespace braid::engine {

// The abort flag as lanes read it: a plain 32-bit word (executor::WaitControl),
// loaded atomically by the interpreter on the host and on a GPU alike.
inline const uint32_t* abortWordOf(const ncclComm& comm) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free,
                "the lanes read the flag as a plain word");
  return reinterpret_cast<const uint32_t*>(&comm.abortFlag);
}

// Marks the communicator failed (ncclCommGetAsyncError reports `r`'s code).
void setCommError(ncclComm* comm, const Result& r);

// The transport for a pair of ranks: the first of comm->transports that can
// join them; with `stream`, the first that joins them by a byte stream (TCP,
// IB), or null.
transports::Transport* selectTransport(ncclComm* comm, int peer, bool stream = false);

Deadline deadlineFromNow(const ncclComm* comm);

}  // namespace braid::engine
