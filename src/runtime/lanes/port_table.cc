#include "runtime/lanes/port_table.h"

#include <deque>
#include <set>

#include "core/comm.h"
#include "core/log.h"

namespace braid {
namespace lanes {

namespace {

class HostLaneMemory : public LaneMemory {
 public:
  FifoMemoryProvider& provider(bool sameProcess) override { return sameProcess ? *heap_ : *shm_; }
  Result makePort(const exec::FifoView& fifo, exec::Port** out) override {
    ports_.emplace_back();
    ports_.back().fifo = fifo;
    *out = &ports_.back();
    return Result::success();
  }

 private:
  std::unique_ptr<FifoMemoryProvider> heap_ = makeHeapFifoProvider();
  std::unique_ptr<FifoMemoryProvider> shm_ = makeShmFifoProvider();
  std::deque<exec::Port> ports_;  // stable addresses
};

}  // namespace

std::unique_ptr<LaneMemory> makeHostLaneMemory() { return std::make_unique<HostLaneMemory>(); }

PortTable::PortTable(std::unique_ptr<LaneMemory> memory) : memory_(std::move(memory)) {}
PortTable::~PortTable() = default;

namespace {

bool sameProcess(const PeerInfo& a, const PeerInfo& b) { return a.processId == b.processId; }
bool sameShm(const PeerInfo& a, const PeerInfo& b) {
  return a.hostHash == b.hostHash && a.shmDomain == b.shmDomain;
}

exec::FifoLayout layoutOf(const ncclComm* comm, const PortKey& key, const LaneLimits& limits) {
  return exec::fifoLayout(key.protocol, uint32_t(comm->settings.nslots),
                          payloadBytesOf(limits, key.channel, key.protocol));
}

const char* directionName(const PortKey& key) { return key.send ? "to" : "from"; }

}  // namespace

bool PortTable::reachable(const ncclComm* comm) {
  const PeerInfo& self = comm->peers[size_t(comm->rank)];
  for (const PeerInfo& p : comm->peers)
    if (!sameShm(self, p)) return false;
  return true;
}

FifoMemoryProvider& PortTable::providerFor(const ncclComm* comm, int peer) const {
  return memory_->provider(sameProcess(comm->peers[size_t(comm->rank)], comm->peers[size_t(peer)]));
}

Result PortTable::create(ncclComm* comm, const PortKey& key, const LaneLimits& limits) {
  const exec::FifoLayout layout = layoutOf(comm, key, limits);
  Entry e;
  BRAID_TRY(providerFor(comm, key.peer).create(layout, 0, &e.memory));
  BRAID_TRY(memory_->makePort(exec::fifoViewAt(e.memory->base(), layout), &e.port));
  const std::string blob = e.memory->blob();
  const uint32_t length = uint32_t(blob.size());
  BRAID_TRY(comm->bootstrap->send(key.peer, kTagLaneFifo, &length, sizeof(length)));
  BRAID_TRY(comm->bootstrap->send(key.peer, kTagLaneFifo, blob.data(), blob.size()));
  entries_[key] = std::move(e);
  logMade(comm, key);
  return Result::success();
}

Result PortTable::open(ncclComm* comm, const PortKey& key, const LaneLimits& limits) {
  const exec::FifoLayout layout = layoutOf(comm, key, limits);
  const Deadline deadline = deadlineFromNow(comm);
  uint32_t length = 0;
  BRAID_TRY(comm->bootstrap->recv(key.peer, kTagLaneFifo, &length, sizeof(length), deadline));
  if (length > 4096) return fail(ncclInternalError, "rank %d sent a lane FIFO blob of %u bytes", key.peer, length);
  std::string blob(length, '\0');
  BRAID_TRY(comm->bootstrap->recv(key.peer, kTagLaneFifo, blob.data(), length, deadline));
  Entry e;
  BRAID_TRY(providerFor(comm, key.peer).open(blob, layout.totalBytes, &e.memory));
  BRAID_TRY(memory_->makePort(exec::fifoViewAt(e.memory->base(), layout), &e.port));
  entries_[key] = std::move(e);
  logMade(comm, key);
  return Result::success();
}

void PortTable::logMade(const ncclComm* comm, const PortKey& k) const {
  BRAID_INFO(kLogInit, "rank %d: lane FIFO %s rank %d, channel %d, %s (%s)", comm->rank, directionName(k), k.peer,
             k.channel, k.protocol == exec::Protocol::LL ? "LL" : "bulk", providerFor(comm, k.peer).name());
}

namespace {

std::set<PortKey> missingOf(const std::vector<PortKey>& keys, bool send, const PortTable& table) {
  std::set<PortKey> missing;
  for (const PortKey& k : keys)
    if (k.send == send && table.port(k) == nullptr) missing.insert(k);
  return missing;
}

std::string where(const ncclComm* comm, const PortKey& k) {
  return "rank " + std::to_string(comm->rank) + ": lane FIFO " + directionName(k) + " rank " +
         std::to_string(k.peer);
}

}  // namespace

Result PortTable::offer(ncclComm* comm, const std::vector<PortKey>& keys, const LaneLimits& limits) {
  for (const PortKey& k : missingOf(keys, false, *this)) BRAID_TRY(create(comm, k, limits).context(where(comm, k)));
  return Result::success();
}

Result PortTable::accept(ncclComm* comm, const std::vector<PortKey>& keys, const LaneLimits& limits) {
  for (const PortKey& k : missingOf(keys, true, *this)) BRAID_TRY(open(comm, k, limits).context(where(comm, k)));
  return Result::success();
}

exec::Port* PortTable::port(const PortKey& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : it->second.port;
}

}  // namespace lanes
}  // namespace braid
