// One call of the API, recorded until its group runs.
#pragma once

#include <nccl.h>

#include "reduce/host_reduce.h"
#include "reduce/wire_format.h"
#include "schedule/plan.h"

struct ncclComm;

namespace braid::engine {

struct Task {
  ncclComm* comm = nullptr;
  schedule::Collective coll = schedule::Collective::AllReduce;
  const void* sendbuff = nullptr;
  void* recvbuff = nullptr;
  size_t count = 0;  // in the meaning of CollShape::count
  ncclDataType_t type = ncclFloat32;
  reduce::RedOp op;
  // A PreMulSum scalar in device memory (ncclScalarDevice): op.scalar is filled
  // from here when the call runs, as NCCL reads it when its kernel runs.
  const void* deviceScalar = nullptr;
  int userOp = 0;
  uint64_t sequence = 0;  // the communicator's operation number, set when the group runs
  // The number its peers give the matching call (engine/fingerprint.h), set
  // when the group runs.
  uint64_t callNumber = 0;
  int root = 0;  // or the peer of Send/Recv
  cudaStream_t stream = nullptr;
  // The CUDA device of the buffers it uses, set by device::classifyGroup in
  // a group on device buffers (-1: none used), so that a call queries each
  // buffer's attributes once.
  int device = -1;
  // Its stream's CUDA graph capture when the group ran, asked once by
  // device::classifyGroup (known): the group's later steps ask no stream
  // again (device::captureOf(const Task&, ...)).
  struct Capture {
    bool known = false;
    bool active = false;
    unsigned long long id = 0;
    void* graph = nullptr;  // cudaGraph_t
  } capture;
  // The format of its messages (CommSettings::wireType where it applies,
  // engine/task_plan.h wireTypeFor), fixed when the call is recorded.
  reduce::WireType wire = reduce::WireType::None;
  // Reproducible mode's exact sums of float32 (core/reproducible.h): the
  // fixed-point shift of each block of reduce::fixed::kBlockElems elements
  // of the input, which the ranks agreed on; set, the call's messages are
  // int64 fixed point (WireType::Fixed64) and its op's divisor divides the
  // sums (avg). Owned by the caller until the call ends.
  const int32_t* fixedShifts = nullptr;
};

// A call this rank ran lately and the fingerprint of its messages
// (engine/call_probe.h).
struct RecentCall {
  uint32_t fingerprint = 0;
  Task task;
};

}  // namespace braid::engine
