// Which bytes of a call's buffers a rank reads and writes, and how the staged
// device path carries them through pinned memory in pieces.
//
// Every buffer of a call is rows of `count` elements: one row (allreduce's
// buffers, a gather's send buffer, ...) or one per rank (an allgather's
// receive buffer, ...). A piece is the same range of columns of every row, so
// pieces of one call never touch the same bytes of any buffer, in place or
// not (NCCL's in-place layouts alias columns with the same columns).
#pragma once

#include <cstddef>

#include "engine/task.h"

namespace braid::device {

// Rows of `count` elements the task's rank reads from sendbuff and writes to
// recvbuff: 0, 1 or nranks.
struct StageRows {
  size_t in = 0;
  size_t out = 0;
};

StageRows stageRowsOf(const engine::Task& t, int rank, int nranks);

struct StageSpan {
  size_t inBytes = 0;   // read from sendbuff (the rank's contribution)
  size_t outBytes = 0;  // written to recvbuff
};

// For the task's rank in its communicator of `nranks`.
StageSpan stageSpanOf(const engine::Task& t, int rank, int nranks);

// Columns a piece carries so that its rows fit `budgetBytes` (in and out rows
// apart); a multiple of 64 elements, at least 64 (so pieces keep the wire
// types' groups whole). The same on every rank for the same call, whatever its
// root or buffers, since every rank must run the same pieces.
size_t stagePieceColumns(const engine::Task& t, int nranks, size_t budgetBytes);

// A piece's rows in pinned memory: its in rows packed, then its out rows.
struct StageLayout {
  size_t blockBytes = 0;
  size_t inOffset = 0;
  size_t outOffset = 0;
};

StageLayout stageLayoutOf(const StageRows& rows, size_t rowBytes);

}  // namespace braid::device
