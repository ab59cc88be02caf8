#include "core/init.h"

#include <algorithm>
#include <cstring>

#include "core/env.h"
#include "core/log.h"
#include "core/peer_info.h"
#include "transports/inproc/inproc_transport.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/tcp_transport.h"

namespace braid {

namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;

// Fields of ncclConfig_t a caller's struct may lack: it may come from an older header.
template <typename Field>
bool configHas(const ncclConfig_t* c, const Field* field) {
  return reinterpret_cast<const char*>(field) + sizeof(Field) <=
         reinterpret_cast<const char*>(c) + c->size;
}

std::vector<std::unique_ptr<Transport>> makeTransports() {
  std::vector<std::unique_ptr<Transport>> t;
  t.push_back(makeInprocTransport());
  t.push_back(makeShmTransport());
  t.push_back(makeTcpTransport());
  return t;
}

}  // namespace

Result makeCommSettings(const ncclConfig_t* config, CommSettings* out) {
  CommSettings s;
  s.blocking = envInt("NCCL_COMM_BLOCKING", 1) != 0;
  int64_t buff = envInt("NCCL_BUFFSIZE", 4 << 20);
  s.nslots = static_cast<int>(std::max<int64_t>(2, envInt("BRAID_NSLOTS", 8)));
  s.slotBytes = static_cast<size_t>(std::max<int64_t>(4096, buff / s.nslots)) & ~size_t(63);
  s.nchannels = static_cast<int>(std::clamp<int64_t>(envInt("BRAID_NCHANNELS", 1), 1, 32));
  s.timeoutSeconds = static_cast<double>(envInt("BRAID_TIMEOUT", 600));
  if (config) {
    if (config->magic != kConfigMagic || config->size < offsetof(ncclConfig_t, blocking) + sizeof(int))
      return fail(ncclInvalidArgument,
                  "ncclConfig_t was not initialised with NCCL_CONFIG_INITIALIZER (magic 0x%x, size %zu)",
                  config->magic, config->size);
    if (configHas(config, &config->blocking) && config->blocking != NCCL_CONFIG_UNDEF_INT)
      s.blocking = config->blocking != 0;
    if (configHas(config, &config->maxCTAs) && config->maxCTAs != NCCL_CONFIG_UNDEF_INT &&
        config->maxCTAs > 0)
      s.nchannels = std::min(s.nchannels, config->maxCTAs);
    if (configHas(config, &config->commName) && config->commName) s.name = config->commName;
  }
  *out = s;
  return Result::success();
}

ncclComm* allocateComm(int rank, int nranks, const CommSettings& settings) {
  auto owned = std::make_unique<ncclComm>();
  owned->rank = rank;
  owned->nranks = nranks;
  owned->settings = settings;
  ncclComm* comm = owned.release();  // owned by the registry until destroyComm
  registerComm(comm);
  return comm;
}

Result initCommunicator(ncclComm* comm, const ncclUniqueId& id, int nranks, int rank) {
  setLogRank(rank);
  const Deadline deadline = deadlineFromNow(comm);
  Result r = Bootstrap::create(id, rank, nranks, deadline, &comm->bootstrap);
  if (r.ok()) {
    comm->peers.assign(nranks, PeerInfo{});
    comm->peers[rank] = makeLocalPeerInfo(rank, comm->cudaDev, comm->bootstrap->localAddress());
    r = comm->bootstrap->allGather(comm->peers.data(), sizeof(PeerInfo), deadline);
  }
  if (!r.ok()) {
    r.context("ncclCommInitRank(rank " + std::to_string(rank) + " of " + std::to_string(nranks) + ")");
    comm->initError = r.message();
    setCommError(comm, r);
    return r;
  }
  comm->transports = makeTransports();
  comm->asyncError.store(ncclSuccess);
  comm->state.store(static_cast<int>(CommState::Ready));
  BRAID_INFO(kLogInit, "rank %d of %d ready (%s, slot %zu B x %d, %d channel(s))", rank, nranks,
             comm->settings.name.empty() ? "unnamed" : comm->settings.name.c_str(),
             comm->settings.slotBytes, comm->settings.nslots, comm->settings.nchannels);
  return Result::success();
}

Result splitCommunicator(ncclComm* parent, int color, int key, const CommSettings& settings,
                         ncclComm** out) {
  *out = nullptr;
  const Deadline deadline = deadlineFromNow(parent);
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
  int newRank = 0;
  while (members[newRank].rank != parent->rank) ++newRank;
  // The member with the lowest parent rank starts the new job's root and tells the others.
  int leader = members[0].rank;
  for (const Entry& e : members) leader = std::min(leader, static_cast<int>(e.rank));
  ncclUniqueId id;
  if (parent->rank == leader) {
    BRAID_TRY(createPrivateUniqueId(&id));
    for (const Entry& e : members)
      if (e.rank != leader) BRAID_TRY(parent->bootstrap->send(e.rank, kTagSplit, &id, sizeof(id)));
  } else {
    BRAID_TRY(parent->bootstrap->recv(leader, kTagSplit, &id, sizeof(id), deadline));
  }
  ncclComm* comm = allocateComm(newRank, static_cast<int>(members.size()), settings);
  comm->cudaDev = parent->cudaDev;
  Result r = initCommunicator(comm, id, static_cast<int>(members.size()), newRank);
  if (!r.ok()) {
    destroyComm(comm);
    return r;
  }
  *out = comm;
  return Result::success();
}

void destroyComm(ncclComm* comm) {
  if (comm->initThread.joinable()) comm->initThread.join();
  unregisterComm(comm);
  std::unique_ptr<ncclComm> owned(comm);
  // Connections go before the transports that made them.
  owned->sendConns.clear();
  owned->recvConns.clear();
}

}  // namespace braid
