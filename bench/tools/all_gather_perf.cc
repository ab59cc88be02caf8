// all_gather_perf: ncclAllGather. The size is the gathered output; each rank
// sends size/n. busbw = algbw * (n-1)/n.
#include "common/collective.h"

namespace {
using namespace braid::bench;

CollCounts counts(size_t count, int n) {
  CollCounts c;
  c.sendCount = c.paramCount = count / n;
  c.recvCount = c.sendCount * n;
  c.sendInPlaceOffset = c.sendCount;  // sendbuff = recvbuff + rank*count
  return c;
}

ncclResult_t run(const CollArgs& a) {
  return ncclAllGather(a.send, a.recv, a.count, a.type, a.comm, a.stream);
}

Expect expect(int, int, int, size_t i, const CollCounts& c) {
  return {Expect::kCopy, static_cast<int>(i / c.sendCount), i % c.sendCount};
}

const CollectiveSpec kSpec{
    "AllGather", /*hasOp=*/false, /*hasRoot=*/false, /*checkInPlace=*/true, counts,
    [](int n) { return n; }, [](int n) { return double(n - 1) / n; }, run, expect};
}  // namespace

int main(int argc, char** argv) { return runPerfTool(kSpec, argc, argv); }
