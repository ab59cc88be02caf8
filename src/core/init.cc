#include "core/init.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>

#include "base/diagnosis_signal.h"
#include "base/env.h"
#include "base/log.h"
#include "base/peer_info.h"
#include "core/comm_registry.h"
#include "core/group.h"
#include "core/wire_type.h"
#include "engine/calibration_measure.h"
#include "engine/device/device.h"
#include "engine/device/launch_plan.h"
#include "transports/registry/registry.h"
#include "tuning/device_channels.h"
#include "tuning/planner.h"

namespace braid::core {

namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;
constexpr int64_t kMaxSlotBytes = int64_t(1) << 30;

// Fields of ncclConfig_t a caller's struct may lack: it may come from an older header.
template <typename Field>
bool configHas(const ncclConfig_t* c, const Field* field) {
  return reinterpret_cast<const char*>(field) + sizeof(Field) <=
         reinterpret_cast<const char*>(c) + c->size;
}

}  // namespace

Result makeCommSettings(const ncclConfig_t* config, engine::CommSettings* out) {
  engine::CommSettings s;
  s.blocking = envInt("NCCL_COMM_BLOCKING", 1) != 0;
  int64_t buff = envInt("NCCL_BUFFSIZE", 4 << 20);
  s.nslots = static_cast<int>(std::max<int64_t>(2, envInt("BRAID_NSLOTS", 8)));
  // A message's size travels in 32 bits (kernels/executor/fifo_view.h): slots
  // stay below 1 GiB whatever NCCL_BUFFSIZE asks.
  s.slotBytes = static_cast<size_t>(std::clamp<int64_t>(buff / s.nslots, 4096, kMaxSlotBytes)) & ~size_t(63);
  s.nchannels = static_cast<int>(std::clamp<int64_t>(envInt("BRAID_NCHANNELS", 1), 1, 32));
  s.nchannelsFixed = !envString("BRAID_NCHANNELS").empty();
  s.deviceFifoArenaBytes = static_cast<size_t>(std::max<int64_t>(0, envInt("BRAID_DEVICE_FIFO_ARENA", int64_t(128) << 20)));
  s.laneBeacons = static_cast<size_t>(std::clamp<int64_t>(envInt("BRAID_LANE_BEACONS", 16384), 1, int64_t(1) << 20));
  s.timeoutSeconds = static_cast<double>(envInt("BRAID_TIMEOUT", 600));
  s.wait.yieldMicros = std::max<int64_t>(0, envInt("BRAID_YIELD_US", 5000));
  s.checkCalls = envInt("BRAID_CHECK", 0) != 0;
  s.wait.sleepNanos = std::clamp<int64_t>(envInt("BRAID_SLEEP_NS", 50000), 0, 999999999);
  const std::string deviceEngine = envString("BRAID_DEVICE_ENGINE", "kernels");
  if (deviceEngine != "staged" && deviceEngine != "kernels")
    return fail(ncclInvalidArgument, "BRAID_DEVICE_ENGINE=%s: expected kernels (the default) or staged",
                deviceEngine.c_str());
  s.deviceKernels = deviceEngine == "kernels";
  const std::string graphEngine = envString("BRAID_GRAPH_ENGINE", "staged");
  if (graphEngine != "staged" && graphEngine != "kernels")
    return fail(ncclInvalidArgument, "BRAID_GRAPH_ENGINE=%s: expected staged (the default) or kernels",
                graphEngine.c_str());
  s.graphKernels = graphEngine == "kernels";
  const std::string hostsEngine = envString("BRAID_MULTIHOST_ENGINE", "staged");
  if (hostsEngine != "staged" && hostsEngine != "kernels")
    return fail(ncclInvalidArgument, "BRAID_MULTIHOST_ENGINE=%s: expected staged (the default) or kernels",
                hostsEngine.c_str());
  s.bridgedKernels = hostsEngine == "kernels";
  s.launchesBlock = envInt("CUDA_LAUNCH_BLOCKING", 0) != 0;
  s.reproducible = envInt("BRAID_REPRODUCIBLE", 0) != 0;
  BRAID_TRY(wireTypeFromEnv(&s.wireType));
  if (config) {
    if (config->magic != kConfigMagic || config->size < offsetof(ncclConfig_t, blocking) + sizeof(int))
      return fail(ncclInvalidArgument,
                  "ncclConfig_t was not initialised with NCCL_CONFIG_INITIALIZER (magic 0x%x, size %zu)",
                  config->magic, config->size);
    if (configHas(config, &config->blocking) && config->blocking != NCCL_CONFIG_UNDEF_INT)
      s.blocking = config->blocking != 0;
    if (configHas(config, &config->maxCTAs) && config->maxCTAs != NCCL_CONFIG_UNDEF_INT &&
        config->maxCTAs > 0) {
      s.nchannels = std::min(s.nchannels, config->maxCTAs);
      s.maxCtas = config->maxCTAs;
    }
    if (configHas(config, &config->commName) && config->commName) s.name = config->commName;
  }
  *out = s;
  return Result::success();
}

ncclComm* allocateComm(int rank, int nranks, const engine::CommSettings& settings) {
  auto owned = std::make_unique<ncclComm>();
  owned->rank = rank;
  owned->nranks = nranks;
  owned->settings = settings;
  ncclComm* comm = owned.release();  // owned by the registry until destroyComm
  registerComm(comm);
  return comm;
}

// Rings and trees keep each host's ranks together, so that a job whose ranks
// are numbered across hosts (round robin, or by a scheduler) crosses the
// network as few times as one numbered host by host. BRAID_TOPO_ORDER=0 keeps
// the rank numbering.
void chooseRingOrder(ncclComm* comm) {
  comm->ringOrder = schedule::RankOrder{};
  if (!envBool("BRAID_TOPO_ORDER", true)) return;
  std::vector<uint64_t> hosts(comm->nranks);
  for (int r = 0; r < comm->nranks; ++r) hosts[r] = comm->peers[r].hostHash;
  comm->ringOrder = schedule::hostContiguousOrder(hosts);
  if (comm->ringOrder.identity() || comm->rank != 0) return;
  std::string order;
  for (int r : comm->ringOrder.rankAt) order += (order.empty() ? "" : " ") + std::to_string(r);
  BRAID_INFO(kLogInit, "ring order follows hosts (%d links cross hosts instead of %d): %s",
             crossHostRingLinks(comm->ringOrder, hosts), crossHostRingLinks(schedule::RankOrder{}, hosts),
             order.c_str());
}

// Every rank must plan alike: the transport class is computed from all peers, and
// rank 0's calibration is used everywhere (measurements differ between processes).
Result agreeOnTuning(ncclComm* comm, Deadline deadline) {
  comm->transportClass = tuning::slowestTransportClass(comm->peers, envBool("NCCL_SHM_DISABLE", false));
  comm->algoFilter = tuning::algoFilterFromEnv();
  std::vector<tuning::CalibrationParams> all(comm->nranks);
  all[comm->rank] = engine::calibration();
  BRAID_TRY(comm->bootstrap->allGather(all.data(), sizeof(tuning::CalibrationParams), deadline));
  comm->calibration = all[0];
  chooseRingOrder(comm);
  BRAID_INFO(kLogTuning, "rank %d: transport class %s, calibration from rank 0: %s", comm->rank,
             transportClassName(comm->transportClass), describeCalibration(comm->calibration).c_str());
  return Result::success();
}

// A waiting rank polls before it yields the core. When this host has a core
// for every rank of the communicator, polling longer answers a peer within
// nanoseconds instead of a scheduler round trip; oversubscribed, a poll steals
// time from the very peer it waits for, so it yields almost at once. The cores
// are those the host's ranks may run on, all together: ranks pinned one per
// core (taskset, mpirun --bind-to core, a job slot per rank) have a core each,
// though each process sees one CPU. A waiter
// that sees its peers' presence slots stops polling once they are off a CPU,
// and polls the long count however many ranks share the cores (shared
// memory, 4 and 8 ranks on 2 cores: performance.md, 2026-12-02, third
// session). BRAID_SPIN_POLLS sets both counts. With a core for every rank
// presence is not heeded: a peer is off its CPU there only after a long wait.
void chooseWaitPolicy(ncclComm* comm) {
  constexpr int64_t kSpinWithACoreEach = 2048, kSpinOversubscribed = 64;
  const uint64_t host = comm->peers[comm->rank].hostHash;
  long local = 0;
  uint64_t hostCpus[16] = {};
  for (const PeerInfo& p : comm->peers)
    if (p.hostHash == host) ++local, addCpus(p, hostCpus);
  // A CPU past the mask's 1024 counts in this process's own count.
  cpu_set_t set;
  const long own = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
  const bool oversubscribed = local > std::max<long>(own, countCpus(hostCpus));
  const auto polls = [](int64_t n) { return static_cast<int>(std::clamp<int64_t>(n, 1, 1 << 24)); };
  comm->settings.wait.spinPolls =
      polls(envInt("BRAID_SPIN_POLLS", oversubscribed ? kSpinOversubscribed : kSpinWithACoreEach));
  comm->settings.wait.presenceSpinPolls = oversubscribed ? polls(envInt("BRAID_SPIN_POLLS", kSpinWithACoreEach)) : 0;
}

namespace {

// This rank's presence slot, its name in the PeerInfo the ranks exchange next.
// Without one (NCCL_SHM_DISABLE=1: nothing of braid in /dev/shm; or /dev/shm
// refused it) its peers poll for it as they would without the hint.
void makePresenceSlot(ncclComm* comm) {
  if (envBool("NCCL_SHM_DISABLE", false)) return;
  Result made = comm->presence.create();
  if (!made.ok()) {
    BRAID_INFO(kLogShm, "rank %d: no presence slot (%s)", comm->rank, made.message().c_str());
    return;
  }
  PeerInfo& self = comm->peers[size_t(comm->rank)];
  if (comm->presence.name().size() < sizeof(self.presenceName))
    memcpy(self.presenceName, comm->presence.name().c_str(), comm->presence.name().size() + 1);
}

// The plan kernels' channels the communicator allows: those whose FIFOs its
// arena holds, two FIFOs each (a ring receives on one per channel; trees on
// more, made on demand past the arena), and at most ncclConfig_t::maxCTAs.
int deviceChannelsAllowed(const engine::CommSettings& s) {
  const size_t perChannel = 2 * s.slotBytes * static_cast<size_t>(s.nslots);
  const int fit = static_cast<int>(std::max<size_t>(1, s.deviceFifoArenaBytes / perChannel));
  return s.maxCtas > 0 ? std::min(fit, s.maxCtas) : fit;
}

}  // namespace

size_t peerFifoBytes(int nranks, size_t ringFifoBytes) {
  constexpr size_t kBudget = 64 << 20, kFloor = 256 << 10;
  const size_t share = kBudget / static_cast<size_t>(std::max(1, 2 * (nranks - 1)));
  return std::min(ringFifoBytes, std::max(kFloor, share));
}

void choosePeerFifo(ncclComm* comm) {
  const size_t ringFifo = comm->settings.slotBytes * static_cast<size_t>(comm->settings.nslots);
  const int64_t fifo = std::max<int64_t>(4096 * comm->settings.nslots,
                                         envInt("BRAID_PEER_BUFFSIZE", static_cast<int64_t>(peerFifoBytes(comm->nranks, ringFifo))));
  comm->settings.peerSlotBytes = static_cast<size_t>(std::min<size_t>(fifo / comm->settings.nslots, kMaxSlotBytes)) & ~size_t(63);
}

Result initCommunicator(ncclComm* comm, const ncclUniqueId& id, int nranks, int rank) {
  setLogRank(rank);
  installDiagnosisSignal();  // before any wait: SIGUSR1 must not kill a rank stuck in init
  const Deadline deadline = engine::deadlineFromNow(comm);
  Result r = guarded("creating the communicator", [&] {
    BRAID_TRY(bootstrap::Bootstrap::create(id, rank, nranks, deadline, &comm->bootstrap));
    comm->peers.assign(nranks, PeerInfo{});
    comm->peers[rank] = makeLocalPeerInfo(rank, comm->cudaDev, comm->bootstrap->localAddress());
    comm->peers[rank].gpuBusId = device::currentGpuBusId();
    comm->peers[rank].gpuSms = comm->peers[rank].gpuBusId >= 0 ? device::currentGpuMultiprocessors() : 0;
    makePresenceSlot(comm);
    BRAID_TRY(comm->bootstrap->allGather(comm->peers.data(), sizeof(PeerInfo), deadline));
    comm->presence.openPeers(comm->peers, rank);
    comm->deviceChannelCap = tuning::deviceChannelCap(comm->peers, deviceChannelsAllowed(comm->settings));
    comm->peerAccessChannelCap =
        tuning::deviceChannelCap(comm->peers, comm->settings.maxCtas > 0 ? comm->settings.maxCtas : INT32_MAX,
                                 tuning::kMaxPeerAccessChannels, tuning::kPeerAccessLanesPerSm);
    if (comm->settings.deviceKernels)
      comm->timeSlicedGpu = device::timeSlicedPeers(comm->peers, device::mpsDaemonRunning());
    device::prepareDeviceWork(comm);
    BRAID_TRY(agreeOnTuning(comm, deadline));
    // Every rank mapped the presence slots it needs before it joined that
    // exchange: the names can go.
    comm->presence.removeName();
    chooseWaitPolicy(comm);
    choosePeerFifo(comm);
    comm->transports = registry::makeTransports();
    return Result::success();
  });
  if (!r.ok()) {
    r.context("ncclCommInitRank(rank " + std::to_string(rank) + " of " + std::to_string(nranks) + ")");
    comm->initError = r.message();
    engine::setCommError(comm, r);
    return r;
  }
  comm->asyncError.store(ncclSuccess);
  comm->state.store(static_cast<int>(engine::CommState::Ready));
  BRAID_INFO(kLogInit, "rank %d of %d ready (%s, slot %zu B x %d, per-peer slot %zu B, %d channel(s))", rank,
             nranks, comm->settings.name.empty() ? "unnamed" : comm->settings.name.c_str(),
             comm->settings.slotBytes, comm->settings.nslots, comm->settings.peerSlotBytes,
             comm->settings.nchannels);
  return Result::success();
}

namespace {

// The child communicator of `parent` whose rank i is parent rank members[i].
// Only the members talk: the one with the lowest parent rank starts the new
// job's root and sends its id to the others over the parent's bootstrap, so
// ranks outside (dead ones included, for ncclCommShrink) are never waited on.
Result formChild(ncclComm* parent, const std::vector<int>& members, const engine::CommSettings& settings,
                 Deadline deadline, ncclComm** out) {
  const auto me = std::find(members.begin(), members.end(), parent->rank);
  if (me == members.end()) return Result::success();
  const int newRank = static_cast<int>(me - members.begin());
  const int leader = *std::min_element(members.begin(), members.end());
  ncclUniqueId id;
  if (parent->rank == leader) {
    BRAID_TRY(bootstrap::createPrivateUniqueId(&id));
    for (int r : members)
      if (r != leader) BRAID_TRY(parent->bootstrap->send(r, bootstrap::kTagSplit, &id, sizeof(id)));
  } else {
    BRAID_TRY(parent->bootstrap->recv(leader, bootstrap::kTagSplit, &id, sizeof(id), deadline));
  }
  const int n = static_cast<int>(members.size());
  ncclComm* comm = allocateComm(newRank, n, settings);
  comm->cudaDev = parent->cudaDev;
  Result r = initCommunicator(comm, id, n, newRank);
  if (!r.ok()) {
    destroyComm(comm);
    return r;
  }
  *out = comm;
  return Result::success();
}

}  // namespace

Result splitCommunicator(ncclComm* parent, int color, int key, const engine::CommSettings& settings, ncclComm** out) {
  *out = nullptr;
  const Deadline deadline = engine::deadlineFromNow(parent);
  struct Entry {
    int32_t color, key, rank;
  };
  std::vector<Entry> all(parent->nranks);
  all[parent->rank] = {color, key, parent->rank};
  BRAID_TRY(parent->bootstrap->allGather(all.data(), sizeof(Entry), deadline));
  if (color == NCCL_SPLIT_NOCOLOR) return Result::success();
  if (color < 0) return fail(ncclInvalidArgument, "ncclCommSplit: color %d is negative", color);

  std::vector<Entry> members;
  for (const Entry& e : all)
    if (e.color == color) members.push_back(e);
  std::stable_sort(members.begin(), members.end(), [](const Entry& a, const Entry& b) {
    return a.key != b.key ? a.key < b.key : a.rank < b.rank;
  });
  std::vector<int> ranks;
  for (const Entry& e : members) ranks.push_back(e.rank);
  return formChild(parent, ranks, settings, deadline, out);
}

Result shrinkCommunicator(ncclComm* parent, const int* exclude, int excludeCount, const engine::CommSettings& settings,
                          ncclComm** out) {
  *out = nullptr;
  if (excludeCount < 0 || (excludeCount > 0 && exclude == nullptr))
    return fail(ncclInvalidArgument, "ncclCommShrink: excludeRanksList is NULL or excludeRanksCount %d < 0",
                excludeCount);
  std::vector<bool> excluded(parent->nranks, false);
  for (int i = 0; i < excludeCount; ++i) {
    if (exclude[i] < 0 || exclude[i] >= parent->nranks)
      return fail(ncclInvalidArgument, "ncclCommShrink: excluded rank %d is outside [0, %d)", exclude[i],
                  parent->nranks);
    excluded[exclude[i]] = true;
  }
  if (excluded[parent->rank])
    return fail(ncclInvalidArgument, "ncclCommShrink: rank %d excludes itself; an excluded rank must not call it",
                parent->rank);
  std::vector<int> members;
  for (int r = 0; r < parent->nranks; ++r)
    if (!excluded[r]) members.push_back(r);
  return formChild(parent, members, settings, engine::deadlineFromNow(parent), out);
}

void destroyComm(ncclComm* comm) {
  if (comm->initThread.joinable()) comm->initThread.join();
  unregisterComm(comm);
  std::unique_ptr<ncclComm> owned(comm);
  // Device calls still queued run (or fail at once after an abort) while the
  // connections exist.
  owned->deviceProxy.reset();
  // The port table's network bridge uses connections: it goes first.
  owned->hostLanes.reset();
  // Connections go before the transports that made them.
  owned->sendConns.clear();
  owned->recvConns.clear();
  if (owned->rank >= 0 && static_cast<size_t>(owned->rank) < owned->peers.size())
    for (auto& t : owned->transports)
      t->cleanUpAfterDeadPeers(owned->peers[owned->rank], owned->peers,
                               std::chrono::milliseconds(owned->failureText().empty() ? 0 : 300));
}

void abortCommunicator(ncclComm* comm) {
  comm->abortFlag.store(1);
  if (comm->bootstrap) comm->bootstrap->abort();
  // Another thread may be inside a call on this communicator: it sees the flag
  // within milliseconds and returns; only then is the communicator freed.
  const auto until = Clock::now() + std::chrono::seconds(30);
  while (comm->activeCalls.load() > 0 && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (comm->activeCalls.load() > 0)
    BRAID_WARN("ncclCommAbort: a call on rank %d's communicator did not end within 30 s; freeing it anyway",
               comm->rank);
  // Stream-wait kernels of device calls exit even if their work never ends.
  device::abortDeviceWork(comm);
  comm->state.store(static_cast<int>(engine::CommState::Aborted));
  destroyComm(comm);
}

void revokeCommunicator(ncclComm* comm) {
  comm->abortFlag.store(1);
  device::abortDeviceWork(comm);  // streams waiting on queued device calls are released too
  engine::setCommError(comm, fail(ncclInvalidUsage, "the communicator was revoked (ncclCommRevoke)"));
}

void settleDeviceWork(ncclComm* comm, bool abortQueued) {
  if (comm->initThread.joinable()) comm->initThread.join();
  if (abortQueued) {
    comm->abortFlag.store(1);
    device::abortDeviceWork(comm);
  }
  device::drainDeviceWork(comm);
}

Result startCommunicator(const ncclUniqueId& id, int nranks, int rank, const engine::CommSettings& settings,
                         ncclComm** out, bool* inProgress) {
  ncclComm* comm = allocateComm(rank, nranks, settings);
  *out = comm;
  *inProgress = !settings.blocking;
  if (settings.blocking)
    return enqueueInit([comm, id, nranks, rank] { return initCommunicator(comm, id, nranks, rank); });
  comm->initThread = std::thread([comm, id, nranks, rank] {
    Result res = initCommunicator(comm, id, nranks, rank);
    if (!res.ok()) BRAID_WARN("%s", res.message().c_str());
  });
  return Result::success();
}

Result initAllCommunicators(int ndev, const int* devlist, engine::CommSettings settings, ncclComm** comms) {
  ncclUniqueId id;
  BRAID_TRY(bootstrap::createPrivateUniqueId(&id));
  settings.blocking = true;
  std::vector<ncclComm*> made(static_cast<size_t>(ndev));
  std::vector<Result> results(static_cast<size_t>(ndev));
  std::vector<std::thread> threads;
  for (int i = 0; i < ndev; ++i) {
    made[size_t(i)] = allocateComm(i, ndev, settings);
    made[size_t(i)]->cudaDev = devlist ? devlist[i] : i;
    threads.emplace_back([&, i] { results[size_t(i)] = initCommunicator(made[size_t(i)], id, ndev, i); });
  }
  for (auto& t : threads) t.join();
  for (const Result& r : results) {
    if (r.ok()) continue;
    for (ncclComm* c : made) destroyComm(c);
    return r;
  }
  std::copy(made.begin(), made.end(), comms);
  return Result::success();
}

}  // namespace braid::core
