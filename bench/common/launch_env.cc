#include "common/launch_env.h"

#include <cerrno>
#include <cstdlib>
#include <string>

namespace braid::bench {
namespace {

const char* envOrNull(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

bool parseInt(const char* name, const char* text, int* out, std::string* error) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 0 || v > (1 << 24)) {
    *error = std::string(name) + "='" + text + "' is not a valid non-negative integer";
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

struct Source {
  const char* rank;
  const char* size;
  const char* localRank;
  const char* localSize;
};

// Order matters: braidrun's variables win over anything inherited from an
// outer launcher.
constexpr Source kSources[] = {
    {"BRAID_RANK", "BRAID_WORLD_SIZE", "BRAID_LOCAL_RANK", "BRAID_LOCAL_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
    {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", nullptr},
    {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
};

}  // namespace

bool detectLaunchEnv(LaunchEnv* out, std::string* error) {
  *out = LaunchEnv{};
  for (const Source& s : kSources) {
    const char* rank = envOrNull(s.rank);
    const char* size = envOrNull(s.size);
    if (!rank || !size) continue;
    LaunchEnv env;
    env.source = std::string(s.rank) + "/" + s.size;
    if (!parseInt(s.rank, rank, &env.rank, error) || !parseInt(s.size, size, &env.size, error))
      return false;
    if (env.size < 1 || env.rank >= env.size) {
      *error = std::string(s.rank) + "=" + rank + " is not below " + s.size + "=" + size;
      return false;
    }
    env.localRank = env.rank;
    env.localSize = env.size;
    const char* localRank = s.localRank ? envOrNull(s.localRank) : nullptr;
    const char* localSize = s.localSize ? envOrNull(s.localSize) : nullptr;
    if (localRank && !parseInt(s.localRank, localRank, &env.localRank, error)) return false;
    if (localSize && !parseInt(s.localSize, localSize, &env.localSize, error)) return false;
    if (localRank && !localSize) env.localSize = env.localRank + 1;  // at least
    *out = env;
    return true;
  }
  return true;
}

bool ensureCommId(const LaunchEnv& env, std::string* note, std::string* error) {
  note->clear();
  if (envOrNull("NCCL_COMM_ID")) return true;
  const char* addr = envOrNull("MASTER_ADDR");
  const char* port = envOrNull("MASTER_PORT");
  if (addr && port) {
    int p = 0;
    if (!parseInt("MASTER_PORT", port, &p, error) || p < 1 || p >= 65535) {
      if (error->empty()) *error = std::string("MASTER_PORT=") + port + " is not a usable TCP port";
      return false;
    }
    std::string host = addr;
    if (host.find(':') != std::string::npos && host.front() != '[') host = "[" + host + "]";
    const std::string id = host + ":" + std::to_string(p + 1);
    setenv("NCCL_COMM_ID", id.c_str(), 1);
    *note = "NCCL_COMM_ID=" + id + " (MASTER_ADDR:MASTER_PORT+1)";
    return true;
  }
  if (env.size > 1) {
    *error = "this job has " + std::to_string(env.size) + " ranks (from " + env.source +
             ") but NCCL_COMM_ID is not set, so the ranks cannot find each other. Set "
             "NCCL_COMM_ID=<host of rank 0>:<free port> in every rank's environment (e.g. "
             "mpirun -x NCCL_COMM_ID=node0:29600), or set MASTER_ADDR and MASTER_PORT, or "
             "start the job with braidrun -n N";
    return false;
  }
  return true;
}

}  // namespace braid::bench
