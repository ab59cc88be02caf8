// sendrecv_perf: every rank sends to rank+1 and receives from rank-1 in one
// group; busbw = algbw. In place is timed but not checked.
#include "common/collective.h"

namespace {
using namespace braid::bench;

CollCounts counts(size_t count, int) {
  CollCounts c;
  c.sendCount = c.recvCount = c.paramCount = count;
  return c;
}

ncclResult_t run(const CollArgs& a) {
  const int to = (a.rank + 1) % a.nranks;
  const int from = (a.rank - 1 + a.nranks) % a.nranks;
  ncclResult_t r = ncclGroupStart();
  if (r != ncclSuccess) return r;
  r = ncclSend(a.send, a.count, a.type, to, a.comm, a.stream);
  const ncclResult_t r2 = ncclRecv(a.recv, a.count, a.type, from, a.comm, a.stream);
  const ncclResult_t r3 = ncclGroupEnd();  // always close the group
  return r != ncclSuccess ? r : r2 != ncclSuccess ? r2 : r3;
}

Expect expect(int rank, int n, int, size_t i, const CollCounts&) {
  return {Expect::kCopy, (rank - 1 + n) % n, i};
}

const CollectiveSpec kSpec{
    "SendRecv", /*hasOp=*/false, /*hasRoot=*/false, /*checkInPlace=*/false, counts,
    [](int) { return 1; }, [](int) { return 1.0; }, run, expect};
}  // namespace

int main(int argc, char** argv) { return runPerfTool(kSpec, argc, argv); }
