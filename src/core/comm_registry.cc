#include "core/comm_registry.h"

#include <atomic>
#include <mutex>
#include <unordered_set>

namespace braid::core {

namespace {

struct CommRegistry {
  std::mutex mutex;
  std::unordered_set<const ncclComm*> live;
  // Bumped whenever a handle dies, so a thread may trust the handle it last
  // found live without taking the lock on every call.
  std::atomic<uint64_t> generation{0};
};

// The handle this thread last found live, and the generation then: one
// thread-local lookup per check.
struct LastLive {
  const ncclComm* comm = nullptr;
  uint64_t generation = 0;
};
thread_local LastLive tlsLastLive;

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
  registry().generation.fetch_add(1, std::memory_order_release);
}

bool isLiveComm(const ncclComm* comm) {
  const uint64_t generation = registry().generation.load(std::memory_order_acquire);
  LastLive& last = tlsLastLive;
  if (comm == last.comm && generation == last.generation) return true;
  std::lock_guard<std::mutex> lock(registry().mutex);
  if (registry().live.count(comm) == 0) return false;
  last = {comm, generation};
  return true;
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
    case engine::CommState::Ready: return Result::success();
    case engine::CommState::Initializing: return fail(ncclInvalidUsage, "%s: communicator is still initialising", what);
    case engine::CommState::Failed: {
      const std::string failure = comm->failureText();
      return fail(comm->asyncError.load(),
                  "%s: rank %d's communicator is in error after an earlier failure; destroy or "
                  "abort it%s%s",
                  what, comm->rank, failure.empty() ? "" : ": ", failure.c_str());
    }
    case engine::CommState::Finalized:
      return fail(ncclInvalidUsage, "%s: communicator was finalized; only ncclCommDestroy is allowed",
                  what);
    case engine::CommState::Aborted: return fail(ncclInvalidUsage, "%s: communicator was aborted", what);
  }
  return Result::success();
}

}  // namespace braid::core
