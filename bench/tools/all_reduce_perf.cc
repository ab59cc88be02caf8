// all_reduce_perf: ncclAllReduce; busbw = algbw * 2(n-1)/n.
#include "common/collective.h"

namespace {
using namespace braid::bench;

CollCounts counts(size_t count, int) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = count;
  return c;
}

ncclResult_t run(const CollArgs& a) {
  return ncclAllReduce(a.send, a.recv, a.count, a.type, a.op, a.comm, a.stream);
}

Expect expect(int, int, int, size_t i, const CollCounts&) { return {Expect::kReduce, 0, i}; }

const CollectiveSpec kSpec{
    "AllReduce", /*hasOp=*/true, /*hasRoot=*/false, /*checkInPlace=*/true, counts,
    [](int) { return 1; }, [](int n) { return 2.0 * (n - 1) / n; }, run, expect};
}  // namespace

int main(int argc, char** argv) { return runPerfTool(kSpec, argc, argv); }
