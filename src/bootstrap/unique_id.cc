// ncclGetUniqueId's work: pick the root's address and magic, and (unless
// NCCL_COMM_ID names a root elsewhere) start the root in this process.
#include <sys/random.h>

#include <cerrno>

#include "base/env.h"
#include "base/log.h"
#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/root.h"
#include "bootstrap/wire.h"

namespace braid::bootstrap {

namespace {

Result randomMagic(uint64_t* out) {
  uint64_t m = 0;
  while (m == 0) {
    ssize_t n = getrandom(&m, sizeof(m), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(m))) return systemFail("getrandom() for the bootstrap magic");
  }
  *out = m;
  return Result::success();
}

}  // namespace

Result createPrivateUniqueId(ncclUniqueId* id) {
  if (!id) return fail(ncclInvalidArgument, "unique id pointer is NULL");
  UniqueIdContents c{};
  c.version = kUniqueIdVersion;
  c.flags = kIdRootRunning;
  sockaddr_storage local{}, root{};
  BRAID_TRY(chooseLocalAddress(nullptr, &local));
  UniqueFd listener;
  BRAID_TRY(listenOn(local, false, &listener, &root));
  BRAID_TRY(randomMagic(&c.magic));
  BRAID_TRY(startRoot(std::move(listener), root, c.magic, 0, nullptr));
  packAddr(root, &c.root);
  encodeUniqueId(c, id);
  BRAID_INFO(kLogBootstrap | kLogInit, "bootstrap: unique id for root %s (root started here)",
             addrToString(root).c_str());
  return Result::success();
}

Result createUniqueId(ncclUniqueId* id) {
  if (!id) return fail(ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  std::string commId = envString("NCCL_COMM_ID");
  if (commId.empty()) return createPrivateUniqueId(id);
  // Every process computes the same id; rank 0 runs the root when it joins.
  sockaddr_storage root{};
  Result r = parseHostPort(commId, socketFamilyFromEnv(), &root);
  if (!r.ok()) return r.context("NCCL_COMM_ID=" + commId);
  UniqueIdContents c{};
  c.version = kUniqueIdVersion;
  c.flags = 0;
  c.magic = magicFromCommId(commId, envString("BRAID_JOB_ID"));
  packAddr(root, &c.root);
  encodeUniqueId(c, id);
  BRAID_INFO(kLogBootstrap | kLogInit, "bootstrap: unique id for root %s (NCCL_COMM_ID)",
             addrToString(root).c_str());
  return Result::success();
}

}  // namespace braid::bootstrap
