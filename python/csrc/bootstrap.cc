#include "bootstrap.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "braid_api.h"

namespace braid_torch {

namespace {

const char* const kIdKey = "braid/unique_id";
const char* const kReadersKey = "braid/unique_id_readers";

// The fallback for what libbraid's API cannot say: libbraid reads some settings
// from the environment when a communicator is made. This sets variables for
// the duration of one such call and puts them back. Creations are serialised;
// a variable that exists is overwritten in place, so threads reading the
// environment meanwhile see the old or the new value.
class ScopedEnv {
 public:
  ScopedEnv() : lock_(mutex()) {}
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) setenv(it->first.c_str(), it->second->c_str(), 1);
      else unsetenv(it->first.c_str());
    }
  }
  void set(const char* name, const std::string& value) {
    const char* old = std::getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    setenv(name, value.c_str(), 1);
  }
  // Only an existing variable is touched: an empty value means "unset" to braid,
  // but another NCCL in the process might read an empty one differently.
  void blankIfSet(const char* name) {
    if (std::getenv(name) != nullptr) set(name, "");
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  std::unique_lock<std::mutex> lock_;
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

std::string wholeSeconds(std::chrono::milliseconds t) {
  // braid's variables hold whole seconds; round up so that a short timeout stays non-zero.
  long long s = (t.count() + 999) / 1000;
  return std::to_string(s < 1 ? 1 : s);
}

double exactSeconds(std::chrono::milliseconds t) {
  return static_cast<double>(std::max<long long>(t.count(), 1)) / 1000.0;
}

std::string initError(const char* call, ncclResult_t r, int rank, int size) {
  const BraidApi& api = braid();
  return std::string("braid: ") + call + " failed for rank " + std::to_string(rank) + " of " +
         std::to_string(size) + ": " + api.getErrorString(r) + ": " + api.getLastError(nullptr);
}

[[noreturn]] void failInit(const char* call, ncclResult_t r, int rank, int size) {
  C10_THROW_ERROR(DistBackendError, initError(call, r, rank, size));
}

ncclUniqueId publishOrReadId(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size) {
  const BraidApi& api = braid();
  ncclUniqueId id;
  if (rank == 0) {
    if (api.getPrivateUniqueId != nullptr) {
      ncclResult_t r = api.getPrivateUniqueId(&id);
      if (r != ncclSuccess) failInit("braidGetPrivateUniqueId", r, rank, size);
    } else {
      // ncclGetUniqueId follows NCCL_COMM_ID, which would give every group the same id.
      ncclResult_t r;
      {
        ScopedEnv env;
        env.blankIfSet("NCCL_COMM_ID");
        r = api.getUniqueId(&id);
      }
      if (r != ncclSuccess) failInit("ncclGetUniqueId", r, rank, size);
    }
    if (size == 1) return id;  // no reader would ever remove the key
    const auto* p = reinterpret_cast<const uint8_t*>(&id);
    store->set(kIdKey, std::vector<uint8_t>(p, p + sizeof(id)));
    return id;
  }
  std::vector<uint8_t> bytes = store->get(kIdKey);
  TORCH_CHECK(bytes.size() == sizeof(id), "braid: the store holds a unique id of ", bytes.size(),
              " bytes, expected ", sizeof(id), " (another job sharing the store?)");
  std::memcpy(&id, bytes.data(), sizeof(id));
  if (store->add(kReadersKey, 1) == size - 1) {
    store->deleteKey(kIdKey);
    store->deleteKey(kReadersKey);
  }
  return id;
}

}  // namespace

ncclComm_t createCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                              std::chrono::milliseconds timeout) {
  const BraidApi& api = braid();
  ncclUniqueId id = publishOrReadId(store, rank, size);
  ncclComm_t comm = nullptr;
  if (api.commInitRankTimeout != nullptr) {
    // The group's timeout bounds the creation and every later operation.
    ncclResult_t r = api.commInitRankTimeout(&comm, size, id, rank, nullptr, exactSeconds(timeout));
    if (r != ncclSuccess) failInit("braidCommInitRankTimeout", r, rank, size);
    return comm;
  }
  ncclResult_t r;
  {
    // An older braid: only the environment bounds the creation (its deadline
    // is taken from BRAID_TIMEOUT as it starts, the bootstrap's sends from
    // BRAID_BOOTSTRAP_TIMEOUT), so these stay set for the duration of this call.
    ScopedEnv env;
    env.set("BRAID_TIMEOUT", wholeSeconds(timeout));
    env.set("BRAID_BOOTSTRAP_TIMEOUT", wholeSeconds(timeout));
    r = api.commInitRank(&comm, size, id, rank);
  }
  if (r != ncclSuccess) failInit("ncclCommInitRank", r, rank, size);
  // The creation's BRAID_TIMEOUT already bounds later operations, in whole
  // seconds; braid's extension sets the group's timeout exactly.
  if (api.commSetTimeout != nullptr) {
    r = api.commSetTimeout(comm, exactSeconds(timeout));
    if (r != ncclSuccess) {
      std::string message = initError("braidCommSetTimeout", r, rank, size);
      (void)api.commDestroy(comm);
      C10_THROW_ERROR(DistBackendError, message);
    }
  }
  return comm;
}

}  // namespace braid_torch
