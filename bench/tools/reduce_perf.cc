// reduce_perf: ncclReduce to -r root (only the root's result is defined);
// busbw = algbw.
#include "common/collective.h"

namespace {
using namespace braid::bench;

CollCounts counts(size_t count, int) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = count;
  return c;
}

ncclResult_t run(const CollArgs& a) {
  return ncclReduce(a.send, a.recv, a.count, a.type, a.op, a.root, a.comm, a.stream);
}

Expect expect(int rank, int, int root, size_t i, const CollCounts&) {
  if (rank != root) return {};
  return {Expect::kReduce, 0, i};
}

const CollectiveSpec kSpec{
    "Reduce", /*hasOp=*/true, /*hasRoot=*/true, /*checkInPlace=*/true, counts,
    [](int) { return 1; }, [](int) { return 1.0; }, run, expect};
}  // namespace

int main(int argc, char** argv) { return runPerfTool(kSpec, argc, argv); }
