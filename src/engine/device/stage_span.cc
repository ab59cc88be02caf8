#include "engine/device/stage_span.h"

#include <algorithm>
#include <cstdint>

#include "reduce/host_reduce.h"

namespace braid::device {

StageSpan stageSpanOf(const engine::Task& t, int rank, int nranks) {
  const size_t n = t.count * reduce::typeSize(t.type);
  const size_t all = n * static_cast<size_t>(nranks);
  const bool root = rank == t.root;
  switch (t.coll) {
    case schedule::Collective::AllReduce: return {n, n};
    case schedule::Collective::ReduceScatter: return {all, n};
    case schedule::Collective::AllGather: return {n, all};
    case schedule::Collective::Broadcast: return {root ? n : 0, n};
    case schedule::Collective::Reduce: return {n, root ? n : 0};
    case schedule::Collective::AllToAll: return {all, all};
    case schedule::Collective::Gather: return {n, root ? all : 0};
    case schedule::Collective::Scatter: return {root ? all : 0, n};
    case schedule::Collective::Send: return {n, 0};
    case schedule::Collective::Recv: return {0, n};
  }
  return {};
}

StageLayout stageLayoutOf(const void* sendbuff, const void* recvbuff, const StageSpan& span) {
  constexpr size_t kAlign = 256;
  const auto in = reinterpret_cast<uintptr_t>(sendbuff);
  const auto out = reinterpret_cast<uintptr_t>(recvbuff);
  StageLayout l;
  const bool overlap = span.inBytes > 0 && span.outBytes > 0 && in < out + span.outBytes &&
                       out < in + span.inBytes;
  if (overlap) {
    const uintptr_t lo = std::min(in, out);
    const uintptr_t hi = std::max(in + span.inBytes, out + span.outBytes);
    l.inOffset = in - lo;
    l.outOffset = out - lo;
    l.blockBytes = hi - lo;
    return l;
  }
  l.inOffset = 0;
  l.outOffset = (span.inBytes + kAlign - 1) / kAlign * kAlign;
  l.blockBytes = l.outOffset + span.outBytes;
  return l;
}

}  // namespace braid::device
