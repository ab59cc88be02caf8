#include "engine/comm.h"

namespace braid::engine {

void setCommError(ncclComm* comm, const Result& r) {
  if (r.ok()) return;
  std::lock_guard<std::mutex> lock(comm->failureMu);
  // The first failure stands, its code with its message: what came after is
  // usually its echo (peers aborted, a kernel's lanes ended).
  if (comm->failure.empty()) {
    comm->failure = r.message();
    comm->asyncError.store(r.code());
  }
  comm->state.store(static_cast<int>(CommState::Failed));
}

transports::Transport* selectTransport(ncclComm* comm, int peer, bool stream) {
  const PeerInfo& self = comm->peers[comm->rank];
  for (auto& t : comm->transports)
    if (!(stream && t->sharesMemory()) && t->canConnect(self, comm->peers[peer])) return t.get();
  return nullptr;
}

Deadline deadlineFromNow(const ncclComm* comm) {
  return Clock::now() + std::chrono::microseconds(
                            static_cast<int64_t>(comm->settings.timeoutSeconds * 1e6));
}

}  // namespace braid::engine
