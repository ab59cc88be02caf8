// Which bytes of a call's buffers a rank reads and writes: what the device path
// copies to pinned memory before the host plan runs and back after it.
#pragma once

#include <cstddef>

#include "engine/task.h"

namespace braid::device {

struct StageSpan {
  size_t inBytes = 0;   // read from sendbuff (the rank's contribution)
  size_t outBytes = 0;  // written to recvbuff
};

// For the task's rank in its communicator of `nranks`.
StageSpan stageSpanOf(const engine::Task& t, int rank, int nranks);

// Where the staged copies go inside one pinned block. When the send and receive
// ranges overlap (in place), they share the block as they share the user's
// allocation, so the plan sees the same aliasing as on host buffers.
struct StageLayout {
  size_t blockBytes = 0;
  size_t inOffset = 0;   // of the staged sendbuff in the block
  size_t outOffset = 0;  // of the staged recvbuff in the block
};

StageLayout stageLayoutOf(const void* sendbuff, const void* recvbuff, const StageSpan& span);

}  // namespace braid::device
