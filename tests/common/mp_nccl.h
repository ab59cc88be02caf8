// Helpers shared by the multi-process NCCL tests: the options that select a
// transport, and the check that the loaded library is braid.
#ifndef BRAID_TESTS_COMMON_MP_NCCL_H_
#define BRAID_TESTS_COMMON_MP_NCCL_H_

#include <dlfcn.h>
#include <nccl.h>

#include <string>

#include "common/mp_harness.h"

namespace mptest {

// The NCCL version braid reports (NCCL API 2.27.7).
constexpr int kBraidNcclVersion = 22707;

// "shm": same-host shared memory (the default between processes of one host);
// "tcp": shared memory disabled, so peers talk over sockets; "2hosts": ranks
// that put themselves on two hosts (hostIdForTransport), shared memory within
// one, FIFOs bridged over TCP between them.
inline RankOptions transportOptions(const std::string& transport, int timeoutSeconds = 120) {
  RankOptions o;
  o.timeoutSeconds = timeoutSeconds;
  o.env.push_back({"NCCL_SHM_DISABLE", transport == "tcp" ? "1" : "0"});
  return o;
}

// Inside a rank, before ncclCommInitRank: for "2hosts", even and odd
// ranks on two hosts (BRAID_HOSTID).
inline void hostIdForTransport(const std::string& transport, int rank) {
  if (transport == "2hosts") setenv("BRAID_HOSTID", rank % 2 ? "mp-host-b" : "mp-host-a", 1);
}

// Inside a rank: fail unless the NCCL in this process is braid.
inline void checkRunsBraid() {
  MP_CHECK(dlsym(RTLD_DEFAULT, "braidVersionString") != nullptr,
           "braidVersionString is not loaded: this process runs another NCCL, not braid");
  int version = 0;
  MP_NCCL_CHECK(ncclGetVersion(&version));
  MP_CHECK(version == kBraidNcclVersion, "ncclGetVersion gave %d, braid reports %d", version,
           kBraidNcclVersion);
}

}  // namespace mptest

#endif  // BRAID_TESTS_COMMON_MP_NCCL_H_
