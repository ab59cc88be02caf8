// reduce_scatter_perf: ncclReduceScatter. The size is the input; each rank
// receives size/n. busbw = algbw * (n-1)/n.
#include "common/collective.h"

namespace {
using namespace braid::bench;

CollCounts counts(size_t count, int n) {
  CollCounts c;
  c.recvCount = c.paramCount = count / n;
  c.sendCount = c.recvCount * n;
  c.recvInPlaceOffset = c.recvCount;  // recvbuff = sendbuff + rank*recvcount
  return c;
}

ncclResult_t run(const CollArgs& a) {
  return ncclReduceScatter(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
}

Expect expect(int rank, int, int, size_t i, const CollCounts& c) {
  return {Expect::kReduce, 0, static_cast<size_t>(rank) * c.recvCount + i};
}

const CollectiveSpec kSpec{
    "ReduceScatter", /*hasOp=*/true, /*hasRoot=*/false, /*checkInPlace=*/true, counts,
    [](int n) { return n; }, [](int n) { return double(n - 1) / n; }, run, expect};
}  // namespace

int main(int argc, char** argv) { return runPerfTool(kSpec, argc, argv); }
