// scatter_perf: ncclScatter from -r root. The size is the root's whole send
// buffer; each rank receives size/n. busbw = algbw * (n-1)/n as in nccl-tests.
#include "common/collective.h"

namespace {
using namespace braid::bench;

CollCounts counts(size_t count, int n) {
  CollCounts c;
  c.recvCount = c.paramCount = count / n;
  c.sendCount = c.recvCount * n;
  c.recvInPlaceOffset = c.recvCount;  // recvbuff = sendbuff + rank*count
  return c;
}

ncclResult_t run(const CollArgs& a) {
  return ncclScatter(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}

Expect expect(int rank, int, int root, size_t i, const CollCounts& c) {
  return {Expect::kCopy, root, static_cast<size_t>(rank) * c.recvCount + i};
}

const CollectiveSpec kSpec{
    "Scatter", /*hasOp=*/false, /*hasRoot=*/true, /*checkInPlace=*/true, counts,
    [](int n) { return n; }, [](int n) { return double(n - 1) / n; }, run, expect};
}  // namespace

int main(int argc, char** argv) { return runPerfTool(kSpec, argc, argv); }
