// The communicator: what a rank knows about its job, and the connections it has
// made so far. `struct ncclComm` is the type behind the API's ncclComm_t.
#pragma once

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "core/plan_cache.h"
#include "core/result.h"
#include "reduce/host_reduce.h"
#include "runtime/device/device.h"
#include "runtime/lanes/port_table.h"
#include "schedule/rank_order.h"
#include "transports/transport.h"
#include "tuning/algo_env.h"
#include "tuning/calibration.h"
#include "tuning/cost_model.h"

namespace braid {

// Settings fixed at init from the environment and the user's ncclConfig_t.
struct CommSettings {
  bool blocking = true;
  size_t slotBytes = 512 * 1024;  // one FIFO slot = the largest step
  size_t peerSlotBytes = 512 * 1024;  // the same for per-peer FIFOs (set at init from the rank count)
  int nslots = 8;
  int nchannels = 1;
  double timeoutSeconds = 600;
  // How a waiting rank gives up its core: yield this long, then sleep this long per poll.
  int64_t yieldMicros = 5000;
  int64_t sleepNanos = 50000;
  int spinPolls = 64;  // polls before the first yield; set at init from ranks per core
  bool checkCalls = false;  // BRAID_CHECK=1: ranks compare their collectives before running them
  // BRAID_DEVICE_ENGINE=kernels: device buffers of communicators whose ranks
  // share a host run as plan kernels; by default (staged) they are staged
  // through pinned memory and run by the host runner.
  bool deviceKernels = false;
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

}  // namespace braid

struct ncclComm {
  int rank = -1;
  int nranks = 0;
  int cudaDev = -1;
  braid::CommSettings settings;

  std::unique_ptr<braid::Bootstrap> bootstrap;
  std::vector<braid::PeerInfo> peers;
  std::vector<std::unique_ptr<braid::Transport>> transports;
  std::map<braid::ConnectionKey, std::unique_ptr<braid::SendConnection>> sendConns;
  std::map<braid::ConnectionKey, std::unique_ptr<braid::RecvConnection>> recvConns;
  std::vector<braid::UserRedOp> userOps;
  std::vector<char> scratch;  // Buffer::Scratch of the plans of one group
  braid::PlanCache planCache;  // single-operation groups, ready to run again

  // What the planner needs; identical on every rank so that all choose alike.
  braid::TransportClass transportClass = braid::TransportClass::SharedMemory;
  braid::CalibrationParams calibration{};  // rank 0's, agreed at init
  braid::AlgoFilter algoFilter;            // NCCL_ALGO / NCCL_PROTO at init
  braid::RankOrder ringOrder;              // positions in rings and trees: hosts contiguous

  uint64_t opCount = 0;  // collectives issued, for diagnosis
  uint64_t collectivesChecked = 0;  // collectives compared under BRAID_CHECK
  std::atomic<int> state{static_cast<int>(braid::CommState::Initializing)};
  std::atomic<ncclResult_t> asyncError{ncclInProgress};
  volatile uint32_t abortFlag = 0;
  std::atomic<int> activeCalls{0};  // groups running on this communicator (see ncclCommAbort)
  std::thread initThread;  // nonblocking init runs here
  std::string initError;   // message of a failed nonblocking init
  std::string failure;     // what put the communicator in error (the first failure)

  // The engine's FIFOs and their ports, made by the first group that needs them.
  std::unique_ptr<braid::lanes::PortTable> lanePorts;

  // Device buffers: the proxy thread and staging memory, made by the first call
  // on device buffers. Last, so that it stops before the connections go.
  std::unique_ptr<braid::DeviceProxy, braid::DeviceProxyDeleter> deviceProxy;

  braid::CommState currentState() const { return static_cast<braid::CommState>(state.load()); }
};

namespace braid {

// Communicators alive in this process. The API checks every handle against it so
// that a destroyed or never-initialised communicator is an error, not a crash.
void registerComm(ncclComm* comm);
void unregisterComm(ncclComm* comm);
bool isLiveComm(const ncclComm* comm);

// Validates a handle passed by the user; `what` names the calling function.
Result checkComm(const ncclComm* comm, const char* what);
// As checkComm, and waits for a nonblocking init to finish; fails if the
// communicator is in error, finalized or aborted.
Result checkUsableComm(ncclComm* comm, const char* what);

// Marks the communicator failed (ncclCommGetAsyncError reports `r`'s code).
void setCommError(ncclComm* comm, const Result& r);

// The transport for a pair of ranks: the first of comm->transports that can
// join them; with `stream`, the first that joins them by a byte stream (TCP,
// IB), or null.
Transport* selectTransport(ncclComm* comm, int peer, bool stream = false);

Deadline deadlineFromNow(const ncclComm* comm);

}  // namespace braid
