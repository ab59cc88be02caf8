// Runs plans on host memory: the calling thread walks every lane of every
// operation of a group, a step at a time, until all are done.
#pragma once

#include <vector>

#include "core/result.h"
#include "reduce/host_reduce.h"
#include "schedule/plan.h"
#include "transports/transport.h"

struct ncclComm;

namespace braid {

// The buffers and arithmetic of one operation.
struct BoundOp {
  const char* input = nullptr;
  char* output = nullptr;
  char* scratch = nullptr;
  size_t elemSize = 0;
  RedOp op;
  // For diagnosis: which call this is.
  Collective coll = Collective::AllReduce;
  size_t count = 0;
  ncclDataType_t type = ncclFloat32;
  uint64_t sequence = 0;  // the communicator's operation number (1-based)
};

// A step with its connections resolved.
struct BoundStep {
  Step step;
  uint32_t op = 0;  // index into HostWork::ops
  SendConnection* send = nullptr;
  RecvConnection* recv = nullptr;
};

struct LaneWork {
  ncclComm* comm = nullptr;
  std::vector<BoundStep> steps;
  size_t next = 0;
  int channel = 0;
  // Channel lanes run one operation (stage) of their communicator at a time;
  // peer lanes (stage -1) may always run.
  int stage = -1;
  int commIndex = 0;
};

// The executor's bookkeeping of which operation each communicator runs.
struct StageCounters {
  std::vector<int> current;  // per communicator: the stage its channel lanes run
  std::vector<int> first;    // per communicator: index of its stage 0 in `left`
  std::vector<int> left;     // per (communicator, stage): lanes not finished
};

struct HostWork {
  std::vector<BoundOp> ops;
  std::vector<LaneWork> lanes;
  std::vector<SendConnection*> sends;  // every send connection the lanes use, once each
  int ncomms = 0;
  StageCounters stages;
  // After a failed run: the communicator and peer of the step that failed, when
  // the failure came from one (-1 otherwise).
  ncclComm* failedComm = nullptr;
  int failedPeer = -1;
};

// Returns when every lane is done and every send has left this process, or with
// an error (naming the lane's rank and the peer it waited for) on timeout,
// abort or a transport failure.
Result runHostWork(HostWork& work);

}  // namespace braid
