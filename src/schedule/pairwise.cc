// Schedules where every message goes straight to its destination rank:
// all-to-all, gather, scatter and point-to-point. Each peer gets a lane of its
// own per direction, so messages to different peers never wait on each other.
#include <algorithm>

#include "schedule/exchange.h"
#include "schedule/generators.h"

namespace braid::schedule {

namespace {

// Every generator below visits each (direction, peer) once, so a lane is made
// without looking for an existing one (which would cost O(p) per peer).
Lane* newLane(Plan* plan, LaneKind kind, int peer) {
  plan->lanes.push_back(Lane{{kind, peer}, kPeerChannel, {}});
  return &plan->lanes.back();
}

void sendChunks(const CollShape& s, Plan* plan, int peer, size_t inOffset) {
  Lane* lane = newLane(plan, LaneKind::PeerSend, peer);
  for (size_t done = 0; done < s.count; done += s.chunkElems) {
    lane->steps.push_back(sendStep(peer, {Buffer::Input, inOffset + done}, std::min(s.chunkElems, s.count - done), false));
  }
}

void recvChunks(const CollShape& s, Plan* plan, int peer, size_t outOffset) {
  Lane* lane = newLane(plan, LaneKind::PeerRecv, peer);
  for (size_t done = 0; done < s.count; done += s.chunkElems) {
    lane->steps.push_back(recvStep(peer, {Buffer::Output, outOffset + done}, std::min(s.chunkElems, s.count - done)));
  }
}

// The rank's own block: a local copy, kept in the send lane to itself.
void selfCopy(const CollShape& s, Plan* plan, size_t inOffset, size_t outOffset) {
  newLane(plan, LaneKind::PeerSend, s.rank)
      ->steps.push_back(copyStep({Buffer::Input, inOffset}, {Buffer::Output, outOffset}, s.count, false, false));
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

}  // namespace braid::schedule
