// alltoall_perf: ncclAlltoAll. The size is one rank's whole send buffer; it
// sends size/n to every rank. busbw = algbw * (n-1)/n. In place is timed
// but not checked (NCCL leaves in-place all-to-all undefined).
#include "common/collective.h"

namespace {
using namespace braid::bench;

CollCounts counts(size_t count, int n) {
  CollCounts c;
  c.paramCount = count / n;
  c.sendCount = c.recvCount = c.paramCount * n;
  return c;
}

ncclResult_t run(const CollArgs& a) {
  return ncclAlltoAll(a.send, a.recv, a.count, a.type, a.comm, a.stream);
}

// Block j of my output is block `rank` of rank j's input.
Expect expect(int rank, int, int, size_t i, const CollCounts& c) {
  const size_t block = c.paramCount;
  return {Expect::kCopy, static_cast<int>(i / block), static_cast<size_t>(rank) * block + i % block};
}

const CollectiveSpec kSpec{
    "AlltoAll", /*hasOp=*/false, /*hasRoot=*/false, /*checkInPlace=*/false, counts,
    [](int n) { return n; }, [](int n) { return double(n - 1) / n; }, run, expect};
}  // namespace

int main(int argc, char** argv) { return runPerfTool(kSpec, argc, argv); }
