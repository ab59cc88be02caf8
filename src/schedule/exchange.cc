#include "schedule/exchange.h"

#include <algorithm>

namespace braid::schedule {

void appendSeg(Segs* segs, size_t off, size_t len) {
  if (len == 0) return;
  if (!segs->empty() && segs->back().off + segs->back().len == off) {
    segs->back().len += len;
    return;
  }
  segs->push_back({off, len});
}

Segs cutIntoPieces(const Segs& segs, size_t chunk) {
  chunk = std::max<size_t>(1, chunk);
  Segs pieces;
  for (const Seg& s : segs)
    for (size_t done = 0; done < s.len; done += chunk)
      pieces.push_back({s.off + done, std::min(chunk, s.len - done)});
  return pieces;
}

size_t totalLength(const Segs& segs) {
  size_t n = 0;
  for (const Seg& s : segs) n += s.len;
  return n;
}

Step sendStep(int peer, BufferRef src, size_t count, bool contribution) {
  Step st;
  st.kind = StepKind::Send;
  st.sendPeer = peer;
  st.src = src;
  st.count = count;
  st.srcIsContribution = contribution;
  return st;
}

Step recvStep(int peer, BufferRef dst, size_t count) {
  Step st;
  st.kind = StepKind::Recv;
  st.recvPeer = peer;
  st.dst = dst;
  st.count = count;
  return st;
}

Step copyStep(BufferRef src, BufferRef dst, size_t count, bool contribution, bool final) {
  Step st;
  st.kind = StepKind::Copy;
  st.src = src;
  st.dst = dst;
  st.count = count;
  st.srcIsContribution = contribution;
  st.final = final;
  return st;
}

Step recvReduceStep(StepKind kind, int recvPeer, int sendPeer, BufferRef src, BufferRef dst, size_t count,
                    bool contribution, bool final) {
  Step st;
  st.kind = kind;
  st.recvPeer = recvPeer;
  if (stepSends(kind)) st.sendPeer = sendPeer;
  st.src = src;
  if (stepWritesDst(kind)) st.dst = dst;
  st.count = count;
  st.srcIsContribution = contribution;
  st.final = final;
  return st;
}

Step recvCopySendStep(int recvPeer, int sendPeer, BufferRef dst, size_t count) {
  Step st;
  st.kind = StepKind::RecvCopySend;
  st.recvPeer = recvPeer;
  st.sendPeer = sendPeer;
  st.dst = dst;
  st.count = count;
  return st;
}

Lane* addChannelLane(Plan* plan, int index, int channel) {
  plan->lanes.push_back(Lane{{LaneKind::Channel, index}, channel, {}});
  return &plan->lanes.back();
}

int floorPow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

int log2Floor(int n) {
  int k = 0;
  while ((2 << k) <= n) ++k;
  return k;
}

}  // namespace braid::schedule
