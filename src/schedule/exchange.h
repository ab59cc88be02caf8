// Building blocks shared by the tree, recursive-doubling and halving-doubling
// generators: lists of contiguous element segments, their cutting into steps of
// at most one chunk, and step constructors.
//
// Both ends of a message derive its segment list from the same function of the
// shape, so they cut it into the same pieces in the same order: that is what
// makes every receive match a send of the same size.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "schedule/generators.h"

namespace braid::schedule {

struct Seg {
  size_t off = 0;
  size_t len = 0;
};
using Segs = std::vector<Seg>;

// Appends [off, off+len), merging with the last segment when they touch; empty
// segments are dropped so that both ends skip them alike.
void appendSeg(Segs* segs, size_t off, size_t len);

// The segments cut into pieces of at most `chunk` elements, in order.
Segs cutIntoPieces(const Segs& segs, size_t chunk);

size_t totalLength(const Segs& segs);

// Step constructors. A step that reads the rank's raw input must say so
// (`contribution`), and only the step producing a finished reduced value is `final`.
Step sendStep(int peer, BufferRef src, size_t count, bool contribution);
Step recvStep(int peer, BufferRef dst, size_t count);
Step copyStep(BufferRef src, BufferRef dst, size_t count, bool contribution, bool final);
Step recvReduceStep(StepKind kind, int recvPeer, int sendPeer, BufferRef src, BufferRef dst, size_t count,
                    bool contribution, bool final);
Step recvCopySendStep(int recvPeer, int sendPeer, BufferRef dst, size_t count);

// Emits send j and receive j alternately (send first) until both lists are
// done. Both partners of a pairwise exchange running this never wait for each
// other by more than one piece, so two FIFO slots suffice even when the two
// directions carry different amounts.
template <typename SendFn, typename RecvFn>
void interleave(Lane* lane, size_t nsend, size_t nrecv, SendFn sendPiece, RecvFn recvPiece) {
  for (size_t j = 0; j < nsend || j < nrecv; ++j) {
    if (j < nsend) lane->steps.push_back(sendPiece(j));
    if (j < nrecv) lane->steps.push_back(recvPiece(j));
  }
}

// Appends a channel lane and returns it. The pointer is valid until the next
// lane is added: fill one lane at a time.
Lane* addChannelLane(Plan* plan, int index, int channel);

// fn(offset, count) for consecutive chunks of the range.
template <typename Fn>
void forEachChunk(ElemRange r, size_t chunk, Fn fn) {
  for (size_t o = r.begin; o < r.end; o += chunk) fn(o, std::min(chunk, r.end - o));
}

inline BufferRef inputAt(size_t off) { return {Buffer::Input, off}; }
inline BufferRef outputAt(size_t off) { return {Buffer::Output, off}; }

// Largest power of two <= n (n >= 1), and its log2.
int floorPow2(int n);
int log2Floor(int n);

}  // namespace braid::schedule
