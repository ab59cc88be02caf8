#include "engine/lanes/port_table.h"

#include <algorithm>
#include <deque>
#include <set>

#include "base/log.h"
#include "engine/comm.h"
#include "engine/connect.h"
#include "transports/inproc/inproc_transport.h"
#include "transports/shm/shm_transport.h"

namespace braid::lanes {

namespace {

class HostLaneMemory : public LaneMemory {
 public:
  transports::FifoMemoryProvider& provider(bool sameProcess) override { return sameProcess ? *heap_ : *shm_; }
  transports::FifoMemoryProvider& bridgedProvider() override { return *heap_; }
  Result makePort(const executor::FifoView& fifo, executor::Port** out) override {
    ports_.emplace_back();
    ports_.back().fifo = fifo;
    *out = &ports_.back();
    return Result::success();
  }

 private:
  std::unique_ptr<transports::FifoMemoryProvider> heap_ = inproc::makeHeapFifoProvider();
  std::unique_ptr<transports::FifoMemoryProvider> shm_ = shm::makeShmFifoProvider();
  std::deque<executor::Port> ports_;  // stable addresses
};

}  // namespace

std::unique_ptr<LaneMemory> makeHostLaneMemory() { return std::make_unique<HostLaneMemory>(); }

PortTable::PortTable(std::unique_ptr<LaneMemory> memory) : memory_(std::move(memory)) {}
PortTable::~PortTable() = default;

namespace {

// A FIFO of `layout` in the provider's memory, its image written before any
// peer can see it.
Result createFifo(transports::FifoMemoryProvider& provider, const executor::FifoLayout& layout,
                  std::unique_ptr<transports::FifoMemory>* out) {
  return provider.create(
      layout.totalBytes, [&](char* image) { executor::initFifoImage(image, layout, 0); }, out);
}

bool sameShm(const PeerInfo& a, const PeerInfo& b) {
  return a.hostHash == b.hostHash && a.shmDomain == b.shmDomain;
}

}  // namespace

bool LaneMemory::reaches(ncclComm* comm, int peer) const {
  const transports::Transport* t = engine::selectTransport(comm, peer);
  return t != nullptr && t->sharesMemory();
}

// Bridged FIFOs are bulk whatever the key's protocol: the proxy learns each
// message's size from the slot (the lanes on both ends follow the FIFO).
executor::FifoLayout PortTable::layoutOf(ncclComm* comm, const PortKey& key, const LaneLimits& limits) const {
  const executor::Protocol protocol = isRemote(comm, key) ? executor::Protocol::Bulk : key.protocol;
  return executor::fifoLayout(protocol, uint32_t(comm->settings.nslots),
                              payloadBytesOf(limits, key.channel, key.protocol));
}

namespace {

const char* directionName(const PortKey& key) { return key.send ? "to" : "from"; }

}  // namespace

bool PortTable::reachable(const ncclComm* comm) {
  for (const PeerInfo& p : comm->peers)
    if (!sharesHostWith(comm, p.rank)) return false;
  return true;
}

bool PortTable::sharesHostWith(const ncclComm* comm, int peer) {
  return sameShm(comm->peers[size_t(comm->rank)], comm->peers[size_t(peer)]);
}

transports::FifoMemoryProvider& PortTable::providerFor(const ncclComm* comm, int peer) const {
  return memory_->provider(sameProcess(comm->peers[size_t(comm->rank)], comm->peers[size_t(peer)]));
}

// The receiver makes the FIFO's memory and sends its blob. Where it cannot (a
// full /dev/shm, say) it sends an empty blob instead, and both ends bridge
// the FIFO over a network transport, with a warning rather than a failed job.
Result PortTable::create(ncclComm* comm, const PortKey& key, const LaneLimits& limits) {
  const executor::FifoLayout layout = layoutOf(comm, key, limits);
  Entry e;
  Result made = createFifo(providerFor(comm, key.peer), layout, &e.memory);
  if (made.ok()) made = memory_->makePort(executor::fifoViewAt(e.memory->base(), layout), &e.port);
  if (!made.ok()) BRAID_TRY(fallBackToBridge(comm, key, made));
  const Blob blob = made.ok() ? e.memory->blob() : Blob();
  const uint32_t length = uint32_t(blob.size());
  BRAID_TRY(comm->bootstrap->send(key.peer, bootstrap::kTagLaneFifo, &length, sizeof(length)));
  if (!made.ok()) return Result::success();
  BRAID_TRY(comm->bootstrap->send(key.peer, bootstrap::kTagLaneFifo, blob.data(), blob.size()));
  entries_[key] = std::move(e);
  logMade(comm, key, providerFor(comm, key.peer).name());
  return Result::success();
}

Result PortTable::fallBackToBridge(ncclComm* comm, const PortKey& key, const Result& why) {
  const transports::Transport* t = engine::selectTransport(comm, key.peer, true);
  if (t == nullptr) return why;
  BRAID_WARN("rank %d: %s; using the %s transport from rank %d instead (slower)", comm->rank, why.message().c_str(),
             t->name(), key.peer);
  bridged_.insert(key);
  return Result::success();
}

Result PortTable::open(ncclComm* comm, const PortKey& key, const LaneLimits& limits) {
  BRAID_TRY(engine::awaitSetUpMessage(comm, key.peer, bootstrap::kTagLaneFifo,
                                      "lane FIFO (channel " + std::to_string(key.channel) + ")"));
  const Deadline deadline = engine::deadlineFromNow(comm);
  uint32_t length = 0;
  BRAID_TRY(comm->bootstrap->recv(key.peer, bootstrap::kTagLaneFifo, &length, sizeof(length), deadline));
  if (length > 4096) return fail(ncclInternalError, "rank %d sent a lane FIFO blob of %u bytes", key.peer, length);
  if (length == 0) {  // the receiver could not make it: bridged
    bridged_.insert(key);
    return Result::success();
  }
  Blob blob(length);
  BRAID_TRY(comm->bootstrap->recv(key.peer, bootstrap::kTagLaneFifo, blob.data(), length, deadline));
  const executor::FifoLayout layout = layoutOf(comm, key, limits);
  Entry e;
  BRAID_TRY(providerFor(comm, key.peer).open(blob, layout.totalBytes, &e.memory));
  BRAID_TRY(memory_->makePort(executor::fifoViewAt(e.memory->base(), layout), &e.port));
  entries_[key] = std::move(e);
  logMade(comm, key, providerFor(comm, key.peer).name());
  return Result::success();
}

void PortTable::logMade(const ncclComm* comm, const PortKey& k, const char* how) const {
  BRAID_INFO(kLogInit, "rank %d: lane FIFO %s rank %d, channel %d, %s (%s)", comm->rank, directionName(k), k.peer,
             k.channel, k.protocol == executor::Protocol::LL ? "LL" : "bulk", how);
}

int PortTable::bridgeChannel(const PortKey& key) {
  // Past the plans' channels (0..kPeerChannel): one connection per
  // lane FIFO, so the bridge never has to say which FIFO a message is for.
  return schedule::kPeerChannel + 1 + 2 * key.channel + (key.protocol == executor::Protocol::LL ? 1 : 0);
}

// A FIFO with a rank out of memory reach is bulk whatever its operations'
// protocol, so LL and bulk operations share it: one connection per channel
// and direction (a lane takes its operations in order, on both ends). A FIFO
// bridged only because its memory could not be made keeps its own (the
// other protocol's FIFO with that peer may be in shared memory).
PortKey PortTable::bridgedKey(ncclComm* comm, const PortKey& k) const {
  if (memory_->reaches(comm, k.peer)) return k;
  PortKey b = k;
  b.protocol = executor::Protocol::Bulk;
  return b;
}

std::vector<engine::ConnectionNeed> PortTable::bridgeNeeds(ncclComm* comm, const std::vector<PortKey>& keys) const {
  std::set<PortKey> bridged;
  for (const PortKey& k : keys)
    if (isRemote(comm, k) && port(k) == nullptr) bridged.insert(bridgedKey(comm, k));
  std::vector<engine::ConnectionNeed> needs;
  for (const PortKey& b : bridged)
    if (port(b) == nullptr) needs.push_back({comm, b.peer, bridgeChannel(b) + memory_->bridgeChannelOffset(), b.send});
  return needs;
}

Result PortTable::attachBridged(ncclComm* comm, const std::vector<PortKey>& keys, const LaneLimits& limits) {
  for (const PortKey& k : std::set<PortKey>(keys.begin(), keys.end())) {
    if (!isRemote(comm, k) || port(k) != nullptr) continue;
    const PortKey b = bridgedKey(comm, k);
    if (port(b) == nullptr) BRAID_TRY(bridge(comm, b, limits));
    if (b < k || k < b) entries_[k].port = port(b);  // shares b's FIFO (memory owned there)
  }
  return Result::success();
}

Result PortTable::bridge(ncclComm* comm, const PortKey& key, const LaneLimits& limits) {
  const executor::FifoLayout layout = layoutOf(comm, key, limits);
  const engine::ConnectionKey ck{key.peer, bridgeChannel(key) + memory_->bridgeChannelOffset()};
  if (key.send ? !comm->sendConns.count(ck) : !comm->recvConns.count(ck))
    return fail(ncclInternalError, "rank %d: no connection for the lane FIFO %s rank %d", comm->rank,
                directionName(key), key.peer);
  Entry e;
  // The bridge reads and writes it on the host; the lanes use it too.
  transports::FifoMemoryProvider& provider = memory_->bridgedProvider();
  BRAID_TRY(createFifo(provider, layout, &e.memory));
  BRAID_TRY(memory_->makePort(executor::fifoViewAt(e.memory->base(), layout), &e.port));
  if (!bridge_) bridge_ = std::make_unique<NetBridge>();
  const executor::FifoView view = executor::fifoViewAt(e.memory->base(), layout);
  if (key.send) bridge_->addSend(view, comm->sendConns.at(ck).get(), key.peer);
  else bridge_->addRecv(view, comm->recvConns.at(ck).get(), key.peer);
  entries_[key] = std::move(e);
  const std::string how = std::string("bridged over ") + engine::selectTransport(comm, key.peer, true)->name() +
                          ", bulk slots in " + provider.name();
  logMade(comm, key, how.c_str());
  return Result::success();
}

namespace {

// Same-host FIFOs not made yet, where this rank sends (or receives).
std::set<PortKey> missingOf(ncclComm* comm, const std::vector<PortKey>& keys, bool send,
                            const PortTable& table) {
  std::set<PortKey> missing;
  for (const PortKey& k : keys)
    if (k.send == send && table.port(k) == nullptr && !table.isRemote(comm, k)) missing.insert(k);
  return missing;
}

std::string where(const ncclComm* comm, const PortKey& k) {
  return "rank " + std::to_string(comm->rank) + ": lane FIFO " + directionName(k) + " rank " +
         std::to_string(k.peer);
}

}  // namespace

Result PortTable::offer(ncclComm* comm, const std::vector<PortKey>& keys, const LaneLimits& limits) {
  for (const PortKey& k : missingOf(comm, keys, false, *this)) BRAID_TRY(create(comm, k, limits).context(where(comm, k)));
  return Result::success();
}

Result PortTable::accept(ncclComm* comm, const std::vector<PortKey>& keys, const LaneLimits& limits) {
  for (const PortKey& k : missingOf(comm, keys, true, *this)) BRAID_TRY(open(comm, k, limits).context(where(comm, k)));
  return Result::success();
}

executor::Port* PortTable::port(const PortKey& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second.port;
}

bool PortTable::connected(const std::vector<PortKey>& keys) const {
  return std::all_of(keys.begin(), keys.end(), [this](const PortKey& k) { return port(k) != nullptr; });
}

}  // namespace braid::lanes
