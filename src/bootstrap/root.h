// The bootstrap root: a thread that collects one hello from each rank of a job
// and answers each with the table of every rank's listening address. It ignores
// (and logs) anything that is not a rank of this job, and gives up after
// BRAID_BOOTSTRAP_TIMEOUT seconds (default 600) naming the ranks that never came.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/socket.h"

namespace braid::bootstrap {

// Stops one root thread early (the rank that started it failed).
class RootHandle {
 public:
  RootHandle() = default;
  explicit RootHandle(std::shared_ptr<AbortFlag> stop) : stop_(std::move(stop)) {}
  void stop() {
    if (stop_) stop_->store(true);
  }

 private:
  std::shared_ptr<AbortFlag> stop_;
};

// Runs a root on `listener` (already bound and listening at `addr`) in a thread
// owned by a process-wide registry, which stops and joins it at exit. `nranks`
// is 0 when unknown: the first valid hello then fixes it.
Result startRoot(UniqueFd listener, const sockaddr_storage& addr, uint64_t magic, int nranks,
                 RootHandle* handle);

// "0, 3-5, 9" (at most `limit` entries, then ", ... (N in all)").
std::string formatRankList(const std::vector<int>& ranks, size_t limit = 32);

// The root's wait in seconds (BRAID_BOOTSTRAP_TIMEOUT, default 600).
int64_t bootstrapTimeoutSeconds();

}  // namespace braid::bootstrap
