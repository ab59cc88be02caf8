#include "engine/device/stage_span.h"

#include <algorithm>

#include "reduce/host_reduce.h"

namespace braid::device {

StageRows stageRowsOf(const engine::Task& t, int rank, int nranks) {
  const size_t all = static_cast<size_t>(nranks);
  const size_t root = rank == t.root ? 1 : 0;
  switch (t.coll) {
    case schedule::Collective::AllReduce: return {1, 1};
    case schedule::Collective::ReduceScatter: return {all, 1};
    case schedule::Collective::AllGather: return {1, all};
    case schedule::Collective::Broadcast: return {root, 1};
    case schedule::Collective::Reduce: return {1, root};
    case schedule::Collective::AllToAll: return {all, all};
    case schedule::Collective::Gather: return {1, root * all};
    case schedule::Collective::Scatter: return {root * all, 1};
    case schedule::Collective::Send: return {1, 0};
    case schedule::Collective::Recv: return {0, 1};
  }
  return {};
}

StageSpan stageSpanOf(const engine::Task& t, int rank, int nranks) {
  const size_t n = t.count * reduce::typeSize(t.type);
  const StageRows rows = stageRowsOf(t, rank, nranks);
  return {rows.in * n, rows.out * n};
}

size_t stagePieceColumns(const engine::Task& t, int nranks, size_t budgetBytes) {
  constexpr size_t kGranule = 64;
  // The most rows any rank of the call stages at once: the root's or another
  // rank's (a send and its receive both stage one row, so both ends cut alike).
  size_t rows = 0;
  for (int rank : {t.root, t.root + 1}) {
    const StageRows r = stageRowsOf(t, rank, nranks);
    rows = std::max(rows, r.in + r.out);
  }
  const size_t perColumn = std::max<size_t>(rows, 1) * reduce::typeSize(t.type);
  return std::max(kGranule, budgetBytes / perColumn / kGranule * kGranule);
}

StageLayout stageLayoutOf(const StageRows& rows, size_t rowBytes) {
  constexpr size_t kAlign = 256;
  StageLayout l;
  l.inOffset = 0;
  l.outOffset = (rows.in * rowBytes + kAlign - 1) / kAlign * kAlign;
  l.blockBytes = l.outOffset + rows.out * rowBytes;
  return l;
}

}  // namespace braid::device
