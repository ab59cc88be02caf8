// Halving-doubling (Rabenseifner): a reduce-scatter by recursive halving, then
// (AllReduce) an all-gather by recursive doubling in the reverse order.
//
// With P the largest power of two <= p, the data is cut into P blocks. In
// halving round k (distance d = P / 2^(k+1)) a rank's window of 2d blocks is
// split in two: it keeps the half holding its own block, sends the other half
// to rank r ^ d and reduces the half r ^ d sends it into its own. After log2(P)
// rounds the window is the rank's own block, complete. The all-gather runs the
// rounds backwards, each partner sending the window it has finished.
//
// Non-powers of two: rank e >= P first sends its whole input to rank e-P, which
// reduces it into its own; e-P then stands for both in the rounds and sends e
// its result at the end. For ReduceScatter, core rank v is responsible for the
// blocks of ranks v and v+P ("virtual block" v), so the halving runs over P
// virtual blocks whatever p is.
//
// Partial sums live in the output buffer (AllReduce) or in a scratch copy of
// the input's layout (ReduceScatter, whose output holds a single block).
#include <algorithm>

#include "schedule/exchange.h"
#include "schedule/generators.h"

namespace braid::schedule {

namespace {

void sendAll(int peer, Buffer buf, const Segs& segs, size_t chunk, bool contribution, Lane* lane) {
  for (const Seg& piece : cutIntoPieces(segs, chunk))
    lane->steps.push_back(sendStep(peer, {buf, piece.off}, piece.len, contribution));
}

void recvAll(int peer, Buffer buf, const Segs& segs, size_t chunk, Lane* lane) {
  for (const Seg& piece : cutIntoPieces(segs, chunk))
    lane->steps.push_back(recvStep(peer, {buf, piece.off}, piece.len));
}

// One halving round: send `give`, reduce the partner's copy of `keep`.
// `dstFor(offset, last)` says where a reduced piece goes.
template <typename DstFor>
void halvingRound(int partner, const Segs& give, const Segs& keep, Buffer src, bool contribution, bool last,
                  size_t chunk, DstFor dstFor, Lane* lane) {
  const Segs sendPieces = cutIntoPieces(give, chunk), keepPieces = cutIntoPieces(keep, chunk);
  interleave(
      lane, sendPieces.size(), keepPieces.size(),
      [&](size_t j) {
        return sendStep(partner, {src, sendPieces[j].off}, sendPieces[j].len, contribution);
      },
      [&](size_t j) {
        const Seg& piece = keepPieces[j];
        return recvReduceStep(StepKind::RecvReduceCopy, partner, -1, {src, piece.off}, dstFor(piece.off, last),
                              piece.len, contribution, last);
      });
}

// The halving schedule over P (virtual) blocks; segsOf(lo, hi) gives the
// elements of blocks [lo, hi). Afterwards the rank's (virtual) block is done.
template <typename SegsOf, typename DstFor>
void halvingRounds(int r, int core, bool fromInput, Buffer partials, size_t chunk, SegsOf segsOf, DstFor dstFor,
                   Lane* lane) {
  int lo = 0;
  for (int d = core / 2, k = 0; d >= 1; d /= 2, ++k) {
    const bool upper = (r & d) != 0;
    const int keepLo = upper ? lo + d : lo, giveLo = upper ? lo : lo + d;
    const bool useInput = fromInput && k == 0;
    halvingRound(r ^ d, segsOf(giveLo, giveLo + d), segsOf(keepLo, keepLo + d), useInput ? Buffer::Input : partials,
                 useInput, d == 1, chunk, dstFor, lane);
    lo = keepLo;
  }
}

}  // namespace

void halvingDoublingAllReduce(const CollShape& s, Plan* plan) {
  const int p = s.nranks, r = s.rank, core = floorPow2(p);
  const size_t align = std::max<size_t>(1, s.align);
  // Pieces cut from aligned starts by an aligned chunk start aligned too (a
  // chunk below `align`, never a FIFO slot's, is left as it is).
  const size_t chunk = s.chunkElems >= align ? s.chunkElems / align * align : s.chunkElems;
  const auto ranges = splitOverChannels(s.count, s.nchannels, chunk, align);
  for (size_t i = 0; i < ranges.size(); ++i) {
    const ElemRange range = ranges[i];
    const int ch = static_cast<int>(i);
    Lane* lane = addChannelLane(plan, ch, ch);
    Segs whole;
    appendSeg(&whole, range.begin, range.size());
    if (p == 1) {
      lane->steps.push_back(
          copyStep({Buffer::Input, range.begin}, {Buffer::Output, range.begin}, range.size(), true, true));
      continue;
    }
    if (r >= core) {
      sendAll(r - core, Buffer::Input, whole, chunk, true, lane);
      recvAll(r - core, Buffer::Output, whole, chunk, lane);
      continue;
    }
    const int folded = r + core < p ? r + core : -1;
    if (folded >= 0)
      for (const Seg& piece : cutIntoPieces(whole, chunk))
        lane->steps.push_back(recvReduceStep(StepKind::RecvReduceCopy, folded, -1, {Buffer::Input, piece.off},
                                             {Buffer::Output, piece.off}, piece.len, true, false));
    // Block b of the range starts at start(b); blocks may be empty.
    auto start = [&](int b) {
      return b == core ? range.end : range.begin + range.size() * static_cast<size_t>(b) / core / align * align;
    };
    auto segsOf = [&](int lo, int hi) {
      Segs segs;
      appendSeg(&segs, start(lo), start(hi) - start(lo));
      return segs;
    };
    halvingRounds(
        r, core, folded < 0, Buffer::Output, chunk, segsOf,
        [](size_t off, bool) {
          return BufferRef{Buffer::Output, off};
        },
        lane);
    for (int d = 1; d < core; d *= 2) {
      const int peer = r ^ d;
      const Segs mine = cutIntoPieces(segsOf(r & ~(d - 1), (r & ~(d - 1)) + d), chunk);
      const Segs theirs = cutIntoPieces(segsOf(peer & ~(d - 1), (peer & ~(d - 1)) + d), chunk);
      interleave(
          lane, mine.size(), theirs.size(),
          [&](size_t j) {
            return sendStep(peer, {Buffer::Output, mine[j].off}, mine[j].len, false);
          },
          [&](size_t j) {
            return recvStep(peer, {Buffer::Output, theirs[j].off}, theirs[j].len);
          });
    }
    if (folded >= 0) sendAll(folded, Buffer::Output, whole, chunk, false, lane);
  }
}

void halvingDoublingReduceScatter(const CollShape& s, Plan* plan) {
  const int p = s.nranks, r = s.rank, core = floorPow2(p);
  const size_t n = s.count;
  const auto ranges = splitOverChannels(n, s.nchannels, s.chunkElems);
  if (p > 1 && r < core) plan->scratchElems = n * static_cast<size_t>(p);
  for (size_t i = 0; i < ranges.size(); ++i) {
    const ElemRange slice = ranges[i];
    const int ch = static_cast<int>(i);
    Lane* lane = addChannelLane(plan, ch, ch);
    auto blockSeg = [&](int b, Segs* segs) {
      appendSeg(segs, static_cast<size_t>(b) * n + slice.begin, slice.size());
    };
    // The elements of virtual blocks [lo, hi), in input (and scratch) coordinates.
    auto segsOf = [&](int lo, int hi) {
      Segs segs;
      for (int v = lo; v < hi; ++v) {
        blockSeg(v, &segs);
        if (v + core < p) blockSeg(v + core, &segs);
      }
      return segs;
    };
    if (p == 1) {
      lane->steps.push_back(
          copyStep({Buffer::Input, slice.begin}, {Buffer::Output, slice.begin}, slice.size(), true, true));
      continue;
    }
    if (r >= core) {
      sendAll(r - core, Buffer::Input, segsOf(0, core), s.chunkElems, true, lane);
      Segs outSlice;
      appendSeg(&outSlice, slice.begin, slice.size());
      recvAll(r - core, Buffer::Output, outSlice, s.chunkElems, lane);
      continue;
    }
    const int folded = r + core < p ? r + core : -1;
    if (folded >= 0)
      for (const Seg& piece : cutIntoPieces(segsOf(0, core), s.chunkElems))
        lane->steps.push_back(recvReduceStep(StepKind::RecvReduceCopy, folded, -1, {Buffer::Input, piece.off},
                                             {Buffer::Scratch, piece.off}, piece.len, true, false));
    // The last round writes the rank's own block to the output and the folded
    // rank's block to scratch, from where it is sent on.
    const size_t ownBegin = static_cast<size_t>(r) * n;
    auto dstFor = [&](size_t off, bool last) {
      if (last && off >= ownBegin && off < ownBegin + n) return BufferRef{Buffer::Output, off - ownBegin};
      return BufferRef{Buffer::Scratch, off};
    };
    halvingRounds(r, core, folded < 0, Buffer::Scratch, s.chunkElems, segsOf, dstFor, lane);
    if (folded >= 0) {
      Segs foldedBlock;
      blockSeg(folded, &foldedBlock);
      sendAll(folded, Buffer::Scratch, foldedBlock, s.chunkElems, false, lane);
    }
  }
}

}  // namespace braid::schedule
