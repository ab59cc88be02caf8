#include "core/comm.h"

#include <unordered_set>

namespace braid {

namespace {

struct CommRegistry {
  std::mutex mutex;
  std::unordered_set<const ncclComm*> live;
};

CommRegistry& registry() {
  static CommRegistry r;  // demanded by the API: handles must be checkable
  return r;
}

}  // namespace

void registerComm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().live.insert(comm);
}

void unregisterComm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().live.erase(comm);
}

bool isLiveComm(const ncclComm* comm) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().live.count(comm) != 0;
}

Result checkComm(const ncclComm* comm, const char* what) {
  if (comm == nullptr) return fail(ncclInvalidArgument, "%s: communicator is NULL", what);
  if (!isLiveComm(comm))
    return fail(ncclInvalidUsage,
                "%s: communicator %p is not a live braid communicator (never initialised, or "
                "already destroyed)",
                what, static_cast<const void*>(comm));
  return Result::success();
}

Result checkUsableComm(ncclComm* comm, const char* what) {
  BRAID_TRY(checkComm(comm, what));
  if (comm->initThread.joinable()) comm->initThread.join();
  switch (comm->currentState()) {
    case CommState::Ready: return Result::success();
    case CommState::Initializing:
      return fail(ncclInvalidUsage, "%s: communicator is still initialising", what);
    case CommState::Failed:
      return fail(comm->asyncError.load(),
                  "%s: rank %d's communicator is in error after an earlier failure; destroy or "
                  "abort it%s%s",
                  what, comm->rank, comm->initError.empty() ? "" : ": ", comm->initError.c_str());
    case CommState::Finalized:
      return fail(ncclInvalidUsage, "%s: communicator was finalized; only ncclCommDestroy is allowed",
                  what);
    case CommState::Aborted:
      return fail(ncclInvalidUsage, "%s: communicator was aborted", what);
  }
  return Result::success();
}

void setCommError(ncclComm* comm, const Result& r) {
  if (r.ok()) return;
  comm->asyncError.store(r.code());
  comm->state.store(static_cast<int>(CommState::Failed));
}

Transport* selectTransport(ncclComm* comm, int peer) {
  const PeerInfo& self = comm->peers[comm->rank];
  for (auto& t : comm->transports)
    if (t->canConnect(self, comm->peers[peer])) return t.get();
  return nullptr;
}

Deadline deadlineFromNow(const ncclComm* comm) {
  return Clock::now() + std::chrono::microseconds(
                            static_cast<int64_t>(comm->settings.timeoutSeconds * 1e6));
}

}  // namespace braid
