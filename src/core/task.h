// One call of the API, recorded until its group runs.
#pragma once

#include <nccl.h>

#include "reduce/host_reduce.h"
#include "schedule/plan.h"

struct ncclComm;

namespace braid {

struct Task {
  ncclComm* comm = nullptr;
  Collective coll = Collective::AllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;  // in the meaning of CollShape::count
  ncclDataType_t type = ncclFloat32;
  RedOp op;
  int userOp = 0;
  uint64_t sequence = 0;  // the communicator's operation number, set when the group runs  // the ncclRedOp_t the caller passed (for messages and BRAID_CHECK)
  int root = 0;  // or the peer of Send/Recv
  cudaStream_t stream = nullptr;
};

}  // namespace braid
