// Schedule generators: pure functions from a collective's shape to one rank's plan.
#pragma once

#include <cstddef>

#include "schedule/plan.h"
#include "schedule/rank_order.h"

namespace braid::schedule {

// The schedule families. Not every algorithm serves every collective; see
// algorithmSupports(). Direct is the pairwise family (all-to-all, gather,
// scatter, send/recv), the only one those collectives have. PeerAccess reads
// and writes the peers' buffers in place (peer_access.cc): the planner offers
// it only where every rank's buffers are addressable and the ranks' calls run
// as one (tuning::TuningInput::peerAccess).
enum class Algorithm : uint8_t { Ring, Tree, RecursiveDoubling, HalvingDoubling, Direct, PeerAccess };
constexpr int kNumAlgorithms = 6;
const char* algorithmName(Algorithm a);
bool algorithmSupports(Algorithm a, Collective c);

struct CollShape {
  Collective coll = Collective::AllReduce;
  Algorithm algorithm = Algorithm::Ring;  // ignored where only Direct applies
  int rank = 0;
  int nranks = 1;
  // Elements, in NCCL's per-call meaning: AllReduce/Broadcast/Reduce count;
  // ReduceScatter recvcount; AllGather sendcount; AllToAll/Gather/Scatter the
  // per-rank block; Send/Recv the message.
  size_t count = 0;
  int root = 0;              // Broadcast/Reduce/Gather/Scatter root; Send/Recv peer
  size_t chunkElems = 1;     // largest step, in elements (one FIFO slot)
  // Halving-doubling allreduce: its channels, blocks and pieces start at
  // multiples of `align` elements when chunkElems >= align (a wire type's group
  // of 32, so that a value re-sent in another piece narrows as its owner's
  // did); 1: anywhere.
  size_t align = 1;
  // A wire type narrows the messages (Task::wire, not fixed point): recursive
  // doubling then keeps what it sends (Step::keepsWire) and narrows its
  // input before the first round, so that both partners of a round add the
  // same two operands.
  bool narrowWire = false;
  int nchannels = 1;         // ring collectives split their data over this many lanes
  // Where ranks sit in rings and trees (null or identity: rank r at position r).
  // Not applied where a step spans several ranks' blocks (recursive-doubling
  // all-gather, halving-doubling reduce-scatter) nor to the direct family.
  const RankOrder* order = nullptr;
};

Plan generatePlan(const CollShape& shape);

}  // namespace braid::schedule
