// The nine collectives of the perf tools, one table row each. Sizes and
// bandwidth factors follow nccl-tests, so the tables compare with theirs.
#include <cstring>

#include "common/collective.h"

namespace braid::bench {
namespace {

// ---- how a size maps to one rank's buffers ------------------------------------

// allreduce, broadcast, reduce, sendrecv: every buffer holds the whole size.
CollCounts wholeCounts(size_t count, int) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = count;
  return c;
}

// allgather, gather: the size is the gathered output; each rank sends size/n.
CollCounts gatherCounts(size_t count, int n) {
  CollCounts c;
  c.sendCount = c.paramCount = count / n;
  c.recvCount = c.sendCount * n;
  c.sendInPlaceOffset = c.sendCount;  // sendbuff = recvbuff + rank*count
  return c;
}

// reducescatter, scatter: the size is the whole input; each rank receives size/n.
CollCounts scatterCounts(size_t count, int n) {
  CollCounts c;
  c.recvCount = c.paramCount = count / n;
  c.sendCount = c.recvCount * n;
  c.recvInPlaceOffset = c.recvCount;  // recvbuff = sendbuff + rank*recvcount
  return c;
}

// alltoall: the size is one rank's whole send buffer; it sends size/n to every rank.
CollCounts alltoallCounts(size_t count, int n) {
  CollCounts c;
  c.paramCount = count / n;
  c.sendCount = c.recvCount = c.paramCount * n;
  return c;
}

int oneRank(int) { return 1; }
int allRanks(int n) { return n; }
double unitFactor(int) { return 1.0; }
double peerShare(int n) { return double(n - 1) / n; }
double twicePeerShare(int n) { return 2.0 * (n - 1) / n; }

// ---- the calls and where each output element comes from ----------------------

ncclResult_t allReduce(const CollArgs& a) {
  return ncclAllReduce(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
}
Expect allReduceExpect(int, int, int, size_t i, const CollCounts&) { return {Expect::kReduce, 0, i}; }

ncclResult_t allGather(const CollArgs& a) {
  return ncclAllGather(a.send, a.recv, a.count, a.type, a.comm, a.stream);
}
Expect allGatherExpect(int, int, int, size_t i, const CollCounts& c) {
  return {Expect::kCopy, static_cast<int>(i / c.sendCount), i % c.sendCount};
}

ncclResult_t reduceScatter(const CollArgs& a) {
  return ncclReduceScatter(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
}
Expect reduceScatterExpect(int rank, int, int, size_t i, const CollCounts& c) {
  return {Expect::kReduce, 0, static_cast<size_t>(rank) * c.recvCount + i};
}

ncclResult_t alltoall(const CollArgs& a) {
  return ncclAlltoAll(a.send, a.recv, a.count, a.type, a.comm, a.stream);
}
// Block j of my output is block `rank` of rank j's input.
Expect alltoallExpect(int rank, int, int, size_t i, const CollCounts& c) {
  const size_t block = c.paramCount;
  return {Expect::kCopy, static_cast<int>(i / block), static_cast<size_t>(rank) * block + i % block};
}

ncclResult_t broadcast(const CollArgs& a) {
  return ncclBroadcast(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}
Expect broadcastExpect(int, int, int root, size_t i, const CollCounts&) { return {Expect::kCopy, root, i}; }

// Only the root's result is defined.
ncclResult_t reduce(const CollArgs& a) {
  return ncclReduce(a.send, a.recv, a.count, a.type, a.op, a.root, a.comm, a.stream);
}
Expect reduceExpect(int rank, int, int root, size_t i, const CollCounts&) {
  if (rank != root) return {};
  return {Expect::kReduce, 0, i};
}

ncclResult_t gather(const CollArgs& a) {
  return ncclGather(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}
Expect gatherExpect(int rank, int, int root, size_t i, const CollCounts& c) {
  if (rank != root) return {};
  return {Expect::kCopy, static_cast<int>(i / c.sendCount), i % c.sendCount};
}

ncclResult_t scatter(const CollArgs& a) {
  return ncclScatter(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}
Expect scatterExpect(int rank, int, int root, size_t i, const CollCounts& c) {
  return {Expect::kCopy, root, static_cast<size_t>(rank) * c.recvCount + i};
}

// Every rank sends to rank+1 and receives from rank-1 in one group.
ncclResult_t sendRecv(const CollArgs& a) {
  const int to = (a.rank + 1) % a.nranks;
  const int from = (a.rank - 1 + a.nranks) % a.nranks;
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  r = ncclSend(a.send, a.count, a.type, to, a.comm, a.stream);
  const ncclResult_t r2 = ncclRecv(a.recv, a.count, a.type, from, a.comm, a.stream);
  const ncclResult_t r3 = ncclGroupEnd();  // always close the group
  return r != ncclSuccess ? r : r2 != ncclSuccess ? r2 : r3;
}
Expect sendRecvExpect(int rank, int n, int, size_t i, const CollCounts&) {
  return {Expect::kCopy, (rank - 1 + n) % n, i};
}

// In-place alltoall and sendrecv are timed but not checked: NCCL leaves
// in-place all-to-all undefined.
const CollectiveSpec kSpecs[] = {
    // tool, header name, hasOp, hasRoot, checkInPlace,
    //   counts, algbwRanks, busFactor, run, expect
    {"all_reduce_perf", "AllReduce", true, false, true,
     wholeCounts, oneRank, twicePeerShare, allReduce, allReduceExpect},
    {"all_gather_perf", "AllGather", false, false, true,
     gatherCounts, allRanks, peerShare, allGather, allGatherExpect},
    {"reduce_scatter_perf", "ReduceScatter", true, false, true,
     scatterCounts, allRanks, peerShare, reduceScatter, reduceScatterExpect},
    {"alltoall_perf", "AlltoAll", false, false, false,
     alltoallCounts, allRanks, peerShare, alltoall, alltoallExpect},
    {"broadcast_perf", "Broadcast", false, true, true,
     wholeCounts, oneRank, unitFactor, broadcast, broadcastExpect},
    {"reduce_perf", "Reduce", true, true, true,
     wholeCounts, oneRank, unitFactor, reduce, reduceExpect},
    {"gather_perf", "Gather", false, true, true,
     gatherCounts, allRanks, peerShare, gather, gatherExpect},
    {"scatter_perf", "Scatter", false, true, true,
     scatterCounts, allRanks, peerShare, scatter, scatterExpect},
    {"sendrecv_perf", "SendRecv", false, false, false,
     wholeCounts, oneRank, unitFactor, sendRecv, sendRecvExpect},
};

}  // namespace

const CollectiveSpec* findCollective(const char* tool) {
  for (const CollectiveSpec& spec : kSpecs)
    if (std::strcmp(spec.tool, tool) == 0) return &spec;
  return nullptr;
}

}  // namespace braid::bench
