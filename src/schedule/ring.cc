// Ring schedules. Rank r sends to r+1 and receives from r-1 on every step.
// Reduce-scatter phase: at step k rank r forwards block (r-1-k) with its own
// contribution added, so after P-1 steps it holds block r complete.
// All-gather phase: the completed blocks travel once more around the ring.
#include <algorithm>

#include "schedule/generators.h"

namespace braid::schedule {

namespace {

int mod(int x, int p) { return ((x % p) + p) % p; }

struct RingBlock {
  size_t inOffset = 0;
  size_t outOffset = 0;
  size_t count = 0;
};

Step makeStep(StepKind kind, const CollShape& s, size_t count) {
  Step st;
  st.kind = kind;
  st.count = count;
  if (stepSends(kind)) st.sendPeer = mod(s.rank + 1, s.nranks);
  if (stepReceives(kind)) st.recvPeer = mod(s.rank - 1, s.nranks);
  return st;
}

void push(Lane* lane, const Step& st) {
  if (st.count > 0) lane->steps.push_back(st);
}

// The reduce-scatter half over blocks[0..P); `thenSend` keeps the finished block
// moving (allreduce) instead of stopping at the owner (reduce-scatter).
void reduceScatterPhase(const CollShape& s, const std::vector<RingBlock>& blocks, bool thenSend,
                        Lane* lane) {
  const int p = s.nranks, r = s.rank;
  const RingBlock& first = blocks[mod(r - 1, p)];
  Step st = makeStep(StepKind::Send, s, first.count);
  st.src = {Buffer::Input, first.inOffset};
  st.srcIsContribution = true;
  push(lane, st);
  for (int k = 1; k <= p - 2; ++k) {
    const RingBlock& b = blocks[mod(r - 1 - k, p)];
    st = makeStep(StepKind::RecvReduceSend, s, b.count);
    st.src = {Buffer::Input, b.inOffset};
    st.srcIsContribution = true;
    push(lane, st);
  }
  const RingBlock& mine = blocks[r];
  st = makeStep(thenSend ? StepKind::RecvReduceCopySend : StepKind::RecvReduceCopy, s, mine.count);
  st.src = {Buffer::Input, mine.inOffset};
  st.dst = {Buffer::Output, mine.outOffset};
  st.srcIsContribution = true;
  st.final = true;
  push(lane, st);
}

// Blocks arrive from r-1 in the order r-1, r-2, ...; the last one is r+1.
void allGatherPhase(const CollShape& s, const std::vector<RingBlock>& blocks, Lane* lane) {
  const int p = s.nranks, r = s.rank;
  for (int k = 1; k <= p - 2; ++k) {
    const RingBlock& b = blocks[mod(r - k, p)];
    Step st = makeStep(StepKind::RecvCopySend, s, b.count);
    st.dst = {Buffer::Output, b.outOffset};
    push(lane, st);
  }
  const RingBlock& last = blocks[mod(r + 1, p)];
  Step st = makeStep(StepKind::Recv, s, last.count);
  st.dst = {Buffer::Output, last.outOffset};
  push(lane, st);
}

void localCopy(size_t inOffset, size_t outOffset, size_t count, bool reduction, Lane* lane) {
  Step st;
  st.kind = StepKind::Copy;
  st.src = {Buffer::Input, inOffset};
  st.dst = {Buffer::Output, outOffset};
  st.count = count;
  st.srcIsContribution = reduction;
  st.final = reduction;
  push(lane, st);
}

}  // namespace

void ringAllReduce(const CollShape& s, ElemRange range, Lane* lane) {
  const int p = s.nranks;
  // One slice holds P blocks of at most one chunk each.
  const size_t slice = s.chunkElems * static_cast<size_t>(p);
  std::vector<RingBlock> blocks(p);
  for (size_t base = range.begin; base < range.end; base += slice) {
    const size_t len = std::min(slice, range.end - base);
    if (p == 1) {
      localCopy(base, base, len, true, lane);
      continue;
    }
    size_t off = base;
    for (int b = 0; b < p; ++b) {
      const size_t n = len / p + (static_cast<size_t>(b) < len % p ? 1 : 0);
      blocks[b] = {off, off, n};
      off += n;
    }
    reduceScatterPhase(s, blocks, true, lane);
    allGatherPhase(s, blocks, lane);
  }
}

void ringReduceScatter(const CollShape& s, ElemRange range, Lane* lane) {
  const int p = s.nranks;
  std::vector<RingBlock> blocks(p);
  for (size_t base = range.begin; base < range.end; base += s.chunkElems) {
    const size_t n = std::min(s.chunkElems, range.end - base);
    if (p == 1) {
      localCopy(base, base, n, true, lane);
      continue;
    }
    for (int b = 0; b < p; ++b) blocks[b] = {b * s.count + base, base, n};
    reduceScatterPhase(s, blocks, false, lane);
  }
}

void ringAllGather(const CollShape& s, ElemRange range, Lane* lane) {
  const int p = s.nranks, r = s.rank;
  std::vector<RingBlock> blocks(p);
  for (size_t base = range.begin; base < range.end; base += s.chunkElems) {
    const size_t n = std::min(s.chunkElems, range.end - base);
    localCopy(base, r * s.count + base, n, false, lane);
    if (p == 1) continue;
    Step st = makeStep(StepKind::Send, s, n);
    st.src = {Buffer::Input, base};
    push(lane, st);
    for (int b = 0; b < p; ++b) blocks[b] = {0, b * s.count + base, n};
    allGatherPhase(s, blocks, lane);
  }
}

void chainBroadcast(const CollShape& s, ElemRange range, Lane* lane) {
  const int p = s.nranks;
  const int pos = mod(s.rank - s.root, p);  // root is 0, the chain ends at root-1
  for (size_t base = range.begin; base < range.end; base += s.chunkElems) {
    const size_t n = std::min(s.chunkElems, range.end - base);
    if (pos == 0) {
      localCopy(base, base, n, false, lane);
      if (p == 1) continue;
      Step st = makeStep(StepKind::Send, s, n);
      st.src = {Buffer::Input, base};
      push(lane, st);
    } else {
      Step st = makeStep(pos == p - 1 ? StepKind::Recv : StepKind::RecvCopySend, s, n);
      st.dst = {Buffer::Output, base};
      push(lane, st);
    }
  }
}

void chainReduce(const CollShape& s, ElemRange range, Lane* lane) {
  const int p = s.nranks;
  const int pos = mod(s.rank - s.root - 1, p);  // starts at root+1, ends at the root
  for (size_t base = range.begin; base < range.end; base += s.chunkElems) {
    const size_t n = std::min(s.chunkElems, range.end - base);
    if (p == 1) {
      localCopy(base, base, n, true, lane);
      continue;
    }
    StepKind kind = pos == 0 ? StepKind::Send
                    : pos == p - 1 ? StepKind::RecvReduceCopy
                                   : StepKind::RecvReduceSend;
    Step st = makeStep(kind, s, n);
    st.src = {Buffer::Input, base};
    st.srcIsContribution = true;
    if (kind == StepKind::RecvReduceCopy) {
      st.dst = {Buffer::Output, base};
      st.final = true;
    }
    push(lane, st);
  }
}

}  // namespace braid::schedule
