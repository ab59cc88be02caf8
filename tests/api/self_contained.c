/* Compiled (not run) by run_header_checks.sh as C99 and C++17 with warnings as
 * errors: braid's nccl.h must stand alone, with or without CUDA's headers, and
 * its initializers must be usable as written in user code. */
#include <nccl.h>
#include <nccl.h> /* the include guard must make a second inclusion harmless */

static int useTheHeader(ncclComm_t comm, cudaStream_t stream) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclUniqueId id;
  ncclRedOp_t op = ncclAvg;
  ncclDataType_t type = ncclBfloat16;
  ncclResult_t (*allReduce)(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                            cudaStream_t) = ncclAllReduce;
  config.blocking = 0;
  id.internal[0] = 1;
  if (allReduce == NULL || sim.size != sizeof(ncclSimInfo_t)) return -1;
  if (comm == NCCL_COMM_NULL) return NCCL_VERSION_CODE;
  return (int)ncclAllReduce(id.internal, id.internal, 1, type, op, comm, stream) +
         (int)ncclCommSplit(comm, NCCL_SPLIT_NOCOLOR, 0, &comm, &config);
}

int main(void) { return useTheHeader(NCCL_COMM_NULL, 0) == NCCL_VERSION(2, 27, 7) ? 0 : 1; }
