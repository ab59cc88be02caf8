// One communicator's FIFOs of the engine, made on first use and kept
// until the communicator goes: each FIFO end's Port (its message count) lives
// here, so lanes of later groups continue where earlier ones stopped.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "base/result.h"
#include "engine/lanes/lane_program.h"
#include "engine/lanes/net_bridge.h"
#include "transports/fifo_memory.h"

struct ncclComm;

namespace braid::engine {
struct ConnectionNeed;  // engine/connect.h
}  // namespace braid::engine

namespace braid::lanes {

// Where one table's FIFOs and Ports live: host memory for lanes on host
// threads, device memory for lanes in a CUDA kernel
// (engine/device/cuda_lane_memory.h).
class LaneMemory {
 public:
  virtual ~LaneMemory() = default;
  // The provider of FIFOs shared with a peer in this process or another one.
  virtual transports::FifoMemoryProvider& provider(bool sameProcess) = 0;
  // The provider of a bridged FIFO's memory (net_bridge.h), which the lanes
  // and the bridge's host thread both address.
  virtual transports::FifoMemoryProvider& bridgedProvider() = 0;
  // A Port (message count 0) for a FIFO end, in memory the lanes reach; it
  // lives as long as this object.
  virtual Result makePort(const executor::FifoView& fifo, executor::Port** out) = 0;
  // Added to bridgeChannel: the connections of two tables of one
  // communicator (host lanes, plan kernels) must never be the same ones, or
  // two bridges would take each other's messages.
  virtual int bridgeChannelOffset() const { return 0; }
  // Whether a FIFO with `peer` can live in memory both reach; else it is
  // bridged over the network (host threads: where the pair's transport
  // shares memory, so NCCL_SHM_DISABLE=1 sends it over TCP).
  virtual bool reaches(ncclComm* comm, int peer) const;
};

// Heap or shm FIFOs and heap Ports, for host threads.
std::unique_ptr<LaneMemory> makeHostLaneMemory();

class PortTable {
 public:
  explicit PortTable(std::unique_ptr<LaneMemory> memory);
  ~PortTable();
  PortTable(const PortTable&) = delete;
  PortTable& operator=(const PortTable&) = delete;

  // Whether this communicator's ranks can all reach each other's FIFO memory
  // (one host, one /dev/shm): the same answer on every rank. Others are
  // bridged over the network (net_bridge.h).
  static bool reachable(const ncclComm* comm);
  // Whether `peer` is on this rank's host and /dev/shm.
  static bool sharesHostWith(const ncclComm* comm, int peer);

  // Makes the FIFOs among `keys` with ranks of this host that do not exist
  // yet, in two phases: offer creates the memory of those this rank receives
  // on and sends their blobs over the bootstrap; accept opens the peers'
  // blobs of those it sends on.
  // A thread that drives several ranks (ncclCommInitAll) offers for all of
  // them before it accepts for any. Keys are taken in sorted order, which both
  // ends of a FIFO share, so blobs pair up without naming their FIFO.
  Result offer(ncclComm* comm, const std::vector<PortKey>& keys, const LaneLimits& limits);
  Result accept(ncclComm* comm, const std::vector<PortKey>& keys, const LaneLimits& limits);

  // FIFOs with ranks on other hosts: each end keeps its own FIFO (bulk) in
  // local memory and the bridge moves the messages over a transport
  // connection of their own, on channel bridgeChannel(key). bridgeNeeds says
  // which connections connectAll must make (for every communicator of the
  // group at once); attachBridged then makes the FIFOs and adds them to the
  // bridge.
  std::vector<engine::ConnectionNeed> bridgeNeeds(ncclComm* comm, const std::vector<PortKey>& keys) const;
  Result attachBridged(ncclComm* comm, const std::vector<PortKey>& keys, const LaneLimits& limits);
  static int bridgeChannel(const PortKey& key);  // of host lanes' tables; plus bridgeChannelOffset
  // The bridge of this communicator's FIFOs with other hosts (null when it
  // has none), pumped by the runner of each group.
  NetBridge* bridge() const { return bridge_.get(); }

  // Whether the FIFO is bridged over the network: its peer's memory is out of
  // reach, or could not be made (fallBackToBridge).
  bool isRemote(ncclComm* comm, const PortKey& key) const {
    return !memory_->reaches(comm, key.peer) || bridged_.count(key) != 0;
  }

  // The port of a connected FIFO end (stable address), or null.
  executor::Port* port(const PortKey& key) const;
  // Whether every one of `keys` has its port: then offer, accept,
  // bridgeNeeds and attachBridged have nothing to do for them.
  bool connected(const std::vector<PortKey>& keys) const;

 private:
  struct Entry {
    std::unique_ptr<transports::FifoMemory> memory;
    executor::Port* port = nullptr;  // owned by memory_
  };
  Result create(ncclComm* comm, const PortKey& key, const LaneLimits& limits);
  Result open(ncclComm* comm, const PortKey& key, const LaneLimits& limits);
  transports::FifoMemoryProvider& providerFor(const ncclComm* comm, int peer) const;
  executor::FifoLayout layoutOf(ncclComm* comm, const PortKey& key, const LaneLimits& limits) const;
  void logMade(const ncclComm* comm, const PortKey& key, const char* how) const;
  Result bridge(ncclComm* comm, const PortKey& key, const LaneLimits& limits);
  Result fallBackToBridge(ncclComm* comm, const PortKey& key, const Result& why);
  PortKey bridgedKey(ncclComm* comm, const PortKey& k) const;

  std::unique_ptr<LaneMemory> memory_;  // declared first: destroyed after the FIFOs
  std::map<PortKey, Entry> entries_;
  std::set<PortKey> bridged_;  // same-host FIFOs whose memory could not be made
  std::unique_ptr<NetBridge> bridge_;
};

}  // namespace braid::lanes
