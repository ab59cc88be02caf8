// Schedule generators: pure functions from a collective's shape to one rank's plan.
#pragma once

#include <cstddef>

#include "schedule/plan.h"

namespace braid {

struct CollShape {
  Collective coll = Collective::AllReduce;
  int rank = 0;
  int nranks = 1;
  // Elements, in NCCL's per-call meaning: AllReduce/Broadcast/Reduce count;
  // ReduceScatter recvcount; AllGather sendcount; AllToAll/Gather/Scatter the
  // per-rank block; Send/Recv the message.
  size_t count = 0;
  int root = 0;              // Broadcast/Reduce/Gather/Scatter root; Send/Recv peer
  size_t chunkElems = 1;     // largest step, in elements (one FIFO slot)
  int nchannels = 1;         // ring collectives split their data over this many lanes
};

Plan generatePlan(const CollShape& shape);

}  // namespace braid
