// Double binary tree schedules (see double_tree.h for the trees).
//
// The data is split into ranges; range i travels down (or up) tree i % 2 on
// channel i, so the two trees never share a FIFO. Every range is cut into
// chunks that pipeline through the tree: a node forwards chunk k while its
// parent already works on chunk k-1.
//
// AllReduce runs the reduction up the tree and the broadcast down it in two
// lanes per node (the "up" lane uses the FIFOs from the children and to the
// parent, the "down" lane those from the parent and to the children), so chunk
// k can go down while chunk k+1 still goes up. The root has no parent: its one
// lane turns every chunk around. A node with two children keeps the partial
// sum of its first child in a chunk of scratch, never in its output buffer:
// the down lane writes the output, and the only order between that write and
// the up lane's use of a partial in the same place would be the messages'
// round trip through the parent, which orders nothing under the LL protocol
// (its lines are relaxed stores; a GPU may make the up lane's write visible
// after the down lane's).
#include <algorithm>

#include "schedule/double_tree.h"
#include "schedule/exchange.h"
#include "schedule/generators.h"

namespace braid::schedule {

namespace {

// Ranges and channels: trees come in pairs, one pair per two channels asked
// for, and at least one pair (two channels) whatever nchannels says.
std::vector<ElemRange> treeRanges(const CollShape& s) {
  const int pairs = std::max(1, s.nchannels / 2);
  return splitOverChannels(s.count, 2 * pairs, s.chunkElems);
}

// The reduction towards the parent for one chunk [o, o+n). `partial` is where a
// node with two children keeps the sum of the first child and its own input.
void upChunk(const TreeLinks& t, size_t o, size_t n, BufferRef partial, Lane* lane) {
  switch (t.nchildren) {
    case 0:
      lane->steps.push_back(sendStep(t.parent, inputAt(o), n, true));
      break;
    case 1:
      lane->steps.push_back(
          recvReduceStep(StepKind::RecvReduceSend, t.children[0], t.parent, inputAt(o), {}, n, true, false));
      break;
    default:
      lane->steps.push_back(
          recvReduceStep(StepKind::RecvReduceCopy, t.children[0], -1, inputAt(o), partial, n, true, false));
      lane->steps.push_back(
          recvReduceStep(StepKind::RecvReduceSend, t.children[1], t.parent, partial, {}, n, false, false));
  }
}

// The finished chunk from the parent into the output and on to the children.
void downChunk(const TreeLinks& t, size_t o, size_t n, Lane* lane) {
  if (t.nchildren == 0) {
    lane->steps.push_back(recvStep(t.parent, outputAt(o), n));
    return;
  }
  lane->steps.push_back(recvCopySendStep(t.parent, t.children[0], outputAt(o), n));
  if (t.nchildren == 2) lane->steps.push_back(sendStep(t.children[1], outputAt(o), n, false));
}

// The root of an AllReduce tree: sum of its children and itself, sent back down.
void rootChunk(const TreeLinks& t, size_t o, size_t n, Lane* lane) {
  switch (t.nchildren) {
    case 0:
      lane->steps.push_back(copyStep(inputAt(o), outputAt(o), n, true, true));
      break;
    case 1:
      lane->steps.push_back(recvReduceStep(StepKind::RecvReduceCopySend, t.children[0], t.children[0], inputAt(o),
                                           outputAt(o), n, true, true));
      break;
    default:
      lane->steps.push_back(
          recvReduceStep(StepKind::RecvReduceCopy, t.children[0], -1, inputAt(o), outputAt(o), n, true, false));
      lane->steps.push_back(recvReduceStep(StepKind::RecvReduceCopySend, t.children[1], t.children[0], outputAt(o),
                                           outputAt(o), n, false, true));
      lane->steps.push_back(sendStep(t.children[1], outputAt(o), n, false));
  }
}

// Where a node with two children keeps a chunk's partial sum: one chunk of
// scratch per lane, reused chunk after chunk (the lane sends it on before it
// receives the next one).
BufferRef partialChunk(const CollShape& s, const ElemRange& range, const TreeLinks& t, Plan* plan) {
  const BufferRef partial{Buffer::Scratch, plan->scratchElems};
  if (t.nchildren == 2) plan->scratchElems += std::min(s.chunkElems, range.size());
  return partial;
}

}  // namespace

void treeAllReduce(const CollShape& s, Plan* plan) {
  const auto ranges = treeRanges(s);
  for (size_t i = 0; i < ranges.size(); ++i) {
    const int ch = static_cast<int>(i);
    const TreeLinks t = doubleTreeLinks(s.nranks, ch % 2, s.rank);
    if (t.parent < 0) {
      Lane* lane = addChannelLane(plan, 2 * ch, ch);
      forEachChunk(ranges[i], s.chunkElems, [&](size_t o, size_t n) { rootChunk(t, o, n, lane); });
      continue;
    }
    Lane* up = addChannelLane(plan, 2 * ch, ch);
    const BufferRef partial = partialChunk(s, ranges[i], t, plan);
    forEachChunk(ranges[i], s.chunkElems, [&](size_t o, size_t n) { upChunk(t, o, n, partial, up); });
    Lane* down = addChannelLane(plan, 2 * ch + 1, ch);
    forEachChunk(ranges[i], s.chunkElems, [&](size_t o, size_t n) { downChunk(t, o, n, down); });
  }
}

void treeBroadcast(const CollShape& s, Plan* plan) {
  const auto ranges = treeRanges(s);
  for (size_t i = 0; i < ranges.size(); ++i) {
    const int ch = static_cast<int>(i);
    const TreeLinks t = rootedTreeLinks(s.nranks, s.root, ch % 2, s.rank);
    Lane* lane = addChannelLane(plan, ch, ch);
    if (s.rank != s.root) {
      forEachChunk(ranges[i], s.chunkElems, [&](size_t o, size_t n) { downChunk(t, o, n, lane); });
      continue;
    }
    lane->steps.push_back(
        copyStep(inputAt(ranges[i].begin), outputAt(ranges[i].begin), ranges[i].size(), false, false));
    if (t.nchildren == 0) continue;
    forEachChunk(ranges[i], s.chunkElems,
                 [&](size_t o, size_t n) { lane->steps.push_back(sendStep(t.children[0], inputAt(o), n, false)); });
  }
}

void treeReduce(const CollShape& s, Plan* plan) {
  const auto ranges = treeRanges(s);
  for (size_t i = 0; i < ranges.size(); ++i) {
    const int ch = static_cast<int>(i);
    const TreeLinks t = rootedTreeLinks(s.nranks, s.root, ch % 2, s.rank);
    Lane* lane = addChannelLane(plan, ch, ch);
    if (s.rank == s.root) {
      forEachChunk(ranges[i], s.chunkElems, [&](size_t o, size_t n) {
        lane->steps.push_back(t.nchildren == 0 ? copyStep(inputAt(o), outputAt(o), n, true, true)
                                               : recvReduceStep(StepKind::RecvReduceCopy, t.children[0], -1,
                                                                inputAt(o), outputAt(o), n, true, true));
      });
      continue;
    }
    const BufferRef partial = partialChunk(s, ranges[i], t, plan);
    forEachChunk(ranges[i], s.chunkElems, [&](size_t o, size_t n) { upChunk(t, o, n, partial, lane); });
  }
}

}  // namespace braid::schedule
