// What one perf tool measures: the NCCL call it makes, how a byte size maps
// to buffer sizes (nccl-tests conventions), its bandwidth factors, and where
// each output element's expected value comes from. The nine specs are one
// table in collective_specs.cc; the driver in perf_driver.cc does everything else.
#pragma once

#include <nccl.h>

#include <cstddef>

namespace braid::bench {

// Element counts for one size of the sweep, as seen by one rank.
struct CollCounts {
  size_t sendCount = 0;   // elements the send buffer holds
  size_t recvCount = 0;   // elements the receive buffer holds
  size_t paramCount = 0;  // the `count` argument of the NCCL call
  // In place, the send (receive) region starts this many elements times the
  // rank into the receive buffer (e.g. allgather: sendbuff = recvbuff + rank*count).
  size_t sendInPlaceOffset = 0;
  size_t recvInPlaceOffset = 0;
};

// Where the expected value of one output element comes from.
struct Expect {
  enum Kind { kUnchecked, kCopy, kReduce };
  Kind kind = kUnchecked;
  int srcRank = 0;      // kCopy: the rank whose input it is
  size_t srcIndex = 0;  // index into srcRank's (kCopy) or every rank's (kReduce) send data
};

struct CollArgs {
  const void* send;
  void* recv;
  size_t count;  // CollCounts::paramCount
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  int rank;
  int nranks;
  ncclComm_t comm;
  cudaStream_t stream;  // null with host memory
};

struct CollectiveSpec {
  const char* tool;       // "all_reduce_perf": the binary that runs it
  const char* name;       // "AllReduce", printed in the header
  bool hasOp;             // the reduction operator matters (redop column, -o)
  bool hasRoot;           // the root matters (root column, -r)
  bool checkInPlace;      // in-place results are defined (false: alltoall, sendrecv)
  // count = size / element size; returns the buffers one rank needs.
  CollCounts (*counts)(size_t count, int nranks);
  // algbw = paramCount * elementSize * algbwRanks(nranks) / time.
  int (*algbwRanks)(int nranks);
  // busbw = algbw * busFactor(nranks).
  double (*busFactor)(int nranks);
  ncclResult_t (*run)(const CollArgs& args);
  // Expected value of receive element `index` on `rank`.
  Expect (*expect)(int rank, int nranks, int root, size_t index, const CollCounts& counts);
};

// The spec of the tool named `tool` ("all_reduce_perf"); null if there is none.
const CollectiveSpec* findCollective(const char* tool);

// Runs the whole tool: parses argv, joins the job, sweeps, prints the table.
// Returns the process exit status (non-zero when any result was wrong).
int runPerfTool(const CollectiveSpec& spec, int argc, char** argv);

}  // namespace braid::bench
