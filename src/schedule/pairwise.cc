// Schedules where every message goes straight to its destination rank:
// all-to-all, gather, scatter and point-to-point. Each peer gets a lane of its
// own per direction, so messages to different peers never wait on each other.
#include <algorithm>

#include "schedule/generators.h"

namespace braid {

namespace {

Lane* laneFor(Plan* plan, LaneKind kind, int peer) {
  for (Lane& l : plan->lanes)
    if (l.key.kind == kind && l.key.index == peer) return &l;
  plan->lanes.push_back(Lane{{kind, peer}, kPeerChannel, {}});
  return &plan->lanes.back();
}

void sendChunks(const CollShape& s, Plan* plan, int peer, size_t inOffset) {
  for (size_t done = 0; done < s.count; done += s.chunkElems) {
    Step st;
    st.kind = StepKind::Send;
    st.sendPeer = peer;
    st.src = {Buffer::Input, inOffset + done};
    st.count = std::min(s.chunkElems, s.count - done);
    laneFor(plan, LaneKind::PeerSend, peer)->steps.push_back(st);
  }
}

void recvChunks(const CollShape& s, Plan* plan, int peer, size_t outOffset) {
  for (size_t done = 0; done < s.count; done += s.chunkElems) {
    Step st;
    st.kind = StepKind::Recv;
    st.recvPeer = peer;
    st.dst = {Buffer::Output, outOffset + done};
    st.count = std::min(s.chunkElems, s.count - done);
    laneFor(plan, LaneKind::PeerRecv, peer)->steps.push_back(st);
  }
}

// The rank's own block: a local copy, kept in the send lane to itself.
void selfCopy(const CollShape& s, Plan* plan, size_t inOffset, size_t outOffset) {
  Step st;
  st.kind = StepKind::Copy;
  st.src = {Buffer::Input, inOffset};
  st.dst = {Buffer::Output, outOffset};
  st.count = s.count;
  laneFor(plan, LaneKind::PeerSend, s.rank)->steps.push_back(st);
}

}  // namespace

void pairwiseAllToAll(const CollShape& s, Plan* plan) {
  // Start with the next rank so that at every moment peers pair up evenly.
  for (int i = 1; i < s.nranks; ++i) {
    const int to = (s.rank + i) % s.nranks;
    const int from = (s.rank - i + s.nranks) % s.nranks;
    sendChunks(s, plan, to, to * s.count);
    recvChunks(s, plan, from, from * s.count);
  }
  selfCopy(s, plan, s.rank * s.count, s.rank * s.count);
}

void directGather(const CollShape& s, Plan* plan) {
  if (s.rank != s.root) {
    sendChunks(s, plan, s.root, 0);
    return;
  }
  for (int peer = 0; peer < s.nranks; ++peer)
    if (peer != s.root) recvChunks(s, plan, peer, peer * s.count);
  selfCopy(s, plan, 0, s.root * s.count);
}

void directScatter(const CollShape& s, Plan* plan) {
  if (s.rank != s.root) {
    recvChunks(s, plan, s.root, 0);
    return;
  }
  for (int peer = 0; peer < s.nranks; ++peer)
    if (peer != s.root) sendChunks(s, plan, peer, peer * s.count);
  selfCopy(s, plan, s.root * s.count, 0);
}

void pointToPoint(const CollShape& s, Plan* plan) {
  if (s.coll == Collective::Send)
    sendChunks(s, plan, s.root, 0);
  else
    recvChunks(s, plan, s.root, 0);
}

}  // namespace braid
