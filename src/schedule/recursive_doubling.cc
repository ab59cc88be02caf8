// Recursive doubling: log2(p) rounds; in round k a rank exchanges everything it
// has with the rank whose number differs in bit k. Latency-optimal for small
// messages: every rank sends n bytes per round (AllReduce) but there are only
// log2(p) rounds.
//
// Non-powers of two (AllReduce): with P the largest power of two <= p, rank
// e >= P first folds its input into rank e-P, the P core ranks run the rounds,
// and e-P sends the result back to e.
//
// AllReduce is generated chunk by chunk: a chunk goes through all rounds before
// the next starts, each round's receive-reduce step sending its result on to
// the next round's partner (one step per round per chunk).
//
// Under a wire type that narrows (CollShape::narrowWire) both partners of a
// round must add the same two values: each keeps the widened narrowing of
// what it sends (Step::keepsWire), and a core rank with no folded rank first
// narrows its input in place in the output (its round-0 message is then that
// copy's narrowing again, which is exact). Float addition commutes, so the
// partners' sums, and in the end every rank's values, have the same bits.
//
// AllGather with p a power of two doubles the gathered block group each round.
// Otherwise it uses Bruck's schedule, which needs no fold: in round k (distance
// d = 2^k) rank r sends the min(d, p-d) blocks r, r+1, ... (mod p) it holds to
// r-d and receives blocks r+d, ... from r+d; blocks land in their final place,
// so no rotation is needed at the end.
#include <algorithm>

#include "schedule/exchange.h"
#include "schedule/generators.h"

namespace braid::schedule {

namespace {

// One chunk of the core ranks' AllReduce. `folded` is the rank e that folds
// into this one, or -1.
void coreChunk(int r, int rounds, int folded, bool narrowWire, size_t o, size_t n, Lane* lane) {
  auto partner = [&](int k) { return r ^ (1 << k); };
  auto keeping = [&](Step st) {
    st.keepsWire = narrowWire;
    return st;
  };
  // The value of round 0 is the input (narrowed, under a wire), or the input
  // plus the folded rank's.
  bool fromInput = folded < 0;
  if (folded >= 0) {
    lane->steps.push_back(keeping(
        recvReduceStep(StepKind::RecvReduceCopySend, folded, partner(0), inputAt(o), outputAt(o), n, true, false)));
  } else if (narrowWire) {
    lane->steps.push_back(keeping(copyStep(inputAt(o), outputAt(o), n, true, false)));
    lane->steps.push_back(sendStep(partner(0), outputAt(o), n, false));
    fromInput = false;
  } else {
    lane->steps.push_back(sendStep(partner(0), inputAt(o), n, true));
  }
  for (int k = 0; k < rounds; ++k) {
    const bool input = k == 0 && fromInput;
    const BufferRef src = input ? inputAt(o) : outputAt(o);
    const bool last = k == rounds - 1;
    const int next = !last ? partner(k + 1) : folded;
    lane->steps.push_back(keeping(recvReduceStep(next >= 0 ? StepKind::RecvReduceCopySend : StepKind::RecvReduceCopy,
                                                 partner(k), next, src, outputAt(o), n, input, last)));
  }
}

// The slices [b, e) of `nblocks` consecutive blocks from `first` (mod p).
Segs blockSlices(int first, int nblocks, int p, size_t n, ElemRange slice) {
  Segs segs;
  for (int j = 0; j < nblocks; ++j)
    appendSeg(&segs, static_cast<size_t>((first + j) % p) * n + slice.begin, slice.size());
  return segs;
}

void exchangeBlocks(int sendTo, const Segs& mine, int recvFrom, const Segs& theirs, size_t chunk, Lane* lane) {
  const Segs sendPieces = cutIntoPieces(mine, chunk), recvPieces = cutIntoPieces(theirs, chunk);
  interleave(
      lane, sendPieces.size(), recvPieces.size(),
      [&](size_t j) { return sendStep(sendTo, outputAt(sendPieces[j].off), sendPieces[j].len, false); },
      [&](size_t j) { return recvStep(recvFrom, outputAt(recvPieces[j].off), recvPieces[j].len); });
}

}  // namespace

void recursiveDoublingAllReduce(const CollShape& s, Plan* plan) {
  const int p = s.nranks, r = s.rank, core = floorPow2(p), rounds = log2Floor(p);
  const auto ranges = splitOverChannels(s.count, s.nchannels, s.chunkElems);
  for (size_t i = 0; i < ranges.size(); ++i) {
    const int ch = static_cast<int>(i);
    if (p == 1) {
      addChannelLane(plan, ch, ch)
          ->steps.push_back(
              copyStep(inputAt(ranges[i].begin), outputAt(ranges[i].begin), ranges[i].size(), true, true));
      continue;
    }
    if (r >= core) {
      // Sending and receiving in separate lanes lets chunk k+1 leave before
      // chunk k's result is back.
      Lane* send = addChannelLane(plan, 2 * ch, ch);
      forEachChunk(ranges[i], s.chunkElems,
                   [&](size_t o, size_t n) { send->steps.push_back(sendStep(r - core, inputAt(o), n, true)); });
      Lane* recv = addChannelLane(plan, 2 * ch + 1, ch);
      forEachChunk(ranges[i], s.chunkElems,
                   [&](size_t o, size_t n) { recv->steps.push_back(recvStep(r - core, outputAt(o), n)); });
      continue;
    }
    const int folded = r + core < p ? r + core : -1;
    Lane* lane = addChannelLane(plan, 2 * ch, ch);
    forEachChunk(ranges[i], s.chunkElems,
                 [&](size_t o, size_t n) { coreChunk(r, rounds, folded, s.narrowWire, o, n, lane); });
  }
}

void recursiveDoublingAllGather(const CollShape& s, Plan* plan) {
  const int p = s.nranks, r = s.rank;
  const size_t n = s.count;
  const auto ranges = splitOverChannels(n, s.nchannels, s.chunkElems);
  for (size_t i = 0; i < ranges.size(); ++i) {
    const ElemRange slice = ranges[i];
    const int ch = static_cast<int>(i);
    Lane* lane = addChannelLane(plan, ch, ch);
    lane->steps.push_back(
        copyStep(inputAt(slice.begin), outputAt(r * n + slice.begin), slice.size(), false, false));
    if (floorPow2(p) == p) {
      for (int d = 1; d < p; d *= 2) {
        const int peer = r ^ d;
        exchangeBlocks(peer, blockSlices(r & ~(d - 1), d, p, n, slice), peer,
                       blockSlices(peer & ~(d - 1), d, p, n, slice), s.chunkElems, lane);
      }
      continue;
    }
    for (int d = 1; d < p; d *= 2) {
      const int nblocks = std::min(d, p - d);
      exchangeBlocks((r - d + p) % p, blockSlices(r, nblocks, p, n, slice), (r + d) % p,
                     blockSlices((r + d) % p, nblocks, p, n, slice), s.chunkElems, lane);
    }
  }
}

}  // namespace braid::schedule
