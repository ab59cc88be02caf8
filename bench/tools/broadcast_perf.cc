// broadcast_perf: ncclBroadcast from -r root; busbw = algbw.
#include "common/collective.h"

namespace {
using namespace braid::bench;

CollCounts counts(size_t count, int) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = count;
  return c;
}

ncclResult_t run(const CollArgs& a) {
  return ncclBroadcast(a.send, a.recv, a.count, a.type, a.root, a.comm, a.stream);
}

Expect expect(int, int, int root, size_t i, const CollCounts&) { return {Expect::kCopy, root, i}; }

const CollectiveSpec kSpec{
    "Broadcast", /*hasOp=*/false, /*hasRoot=*/true, /*checkInPlace=*/true, counts,
    [](int) { return 1; }, [](int) { return 1.0; }, run, expect};
}  // namespace

int main(int argc, char** argv) { return runPerfTool(kSpec, argc, argv); }
