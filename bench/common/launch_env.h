// Where a perf tool process sits in its job, read from the environment that
// the launcher left: no unique id is exchanged by the tools themselves.
// Every rank calls ncclGetUniqueId with the same NCCL_COMM_ID=<host>:<port>,
// from which braid derives the same id in every process.
#pragma once

#include <string>

namespace braid::bench {

struct LaunchEnv {
  int rank = 0;
  int size = 1;
  int localRank = 0;
  int localSize = 1;
  // The variables the values came from, for the header ("BRAID_RANK/BRAID_WORLD_SIZE",
  // "OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE", ..., or "none" for a single rank).
  std::string source = "none";
};

// Reads rank and world size from, in order: BRAID_RANK/BRAID_WORLD_SIZE
// (braidrun), OMPI_COMM_WORLD_RANK/SIZE (Open MPI), PMI_RANK/PMI_SIZE (MPICH,
// Intel MPI), SLURM_PROCID/SLURM_NTASKS (srun), RANK/WORLD_SIZE (torchrun).
// The first pair with both variables set wins; none set means one rank.
// Local rank/size come from the matching launcher's variables when present.
// Returns false with *error set when a value is malformed or out of range.
bool detectLaunchEnv(LaunchEnv* out, std::string* error);

// Makes sure NCCL_COMM_ID is set when the job has more than one rank.
// If unset but MASTER_ADDR and MASTER_PORT are (torchrun), sets
// NCCL_COMM_ID=MASTER_ADDR:(MASTER_PORT+1): torchrun's own store already
// listens on MASTER_PORT. *note describes what was done (may be empty).
// Returns false with *error when a multi-rank job has no way to meet.
bool ensureCommId(const LaunchEnv& env, std::string* note, std::string* error);

}  // namespace braid::bench
