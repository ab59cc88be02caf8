// Symbolic execution of generated plans. Instead of numbers, every element
// holds which input element it comes from and the set of ranks whose
// contributions reached it (sorted disjoint rank intervals, so ring and tree
// partial sums stay a couple of integers however many ranks there are).
// Running every rank's plan over bounded FIFOs proves, without moving data:
//   - every output element holds exactly the contributions it must: nothing
//     missing, nothing counted twice (two sets overlapping when reduced), no
//     mixing of different elements;
//   - the final operation (SumPostDiv) is applied exactly once to every reduced
//     output element, only to complete sums, and the contribution flag
//     (PreMulSum) exactly on reads of the rank's raw input;
//   - no element is read before something wrote it (incl. in-place aliasing);
//   - every receive matches a send of the same size, no message is left over;
//   - no deadlock with `nslots` slots per connection;
//   - every buffer access is in range (input, output, scratch; a rank without
//     a buffer, like a non-root rank's Reduce output, has one of size zero);
//   - every send/receive step moves between 1 and chunkElems elements;
//   - the FIFO invariant: no two lanes of one plan use the same (peer,
//     channel, direction), peer lanes use only their peer's FIFO.
// Because of that invariant each FIFO has one producing and one consuming
// lane, and a step's readiness can only be taken away by the lane itself, so
// whether the plans deadlock does not depend on the order the checker runs
// lanes in. Buffer accesses of two lanes of one rank are only ordered by the
// messages between them; `lifo` runs another interleaving to shake out races.
//
// Cost: memory and time grow with the steps of all ranks' plans, p^2 for
// all-gather, reduce-scatter and all-to-all: the 4096-rank all-to-all with one
// element per block (33.5M steps, 16.7M FIFOs) takes about 2.5 GB. With glibc,
// the first check raises the process's malloc mmap and trim thresholds, so
// that memory freed between the ranks' plans is kept and reused, not mapped
// again page by page.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "schedule/generate.h"

namespace braid {

struct CheckOptions {
  int nslots = 2;  // 1..65535
  // Input and output share memory as NCCL defines in-place for the collective
  // (AllGather: sendbuff == recvbuff + rank*count, and so on). AllToAll has no
  // in-place form; there and on ranks without both buffers it is ignored.
  bool inPlace = false;
  // Run woken lanes last-in first-out (depth first) instead of first-in first-out.
  bool lifo = false;
  // Lets a test break a generated plan to prove the checker notices.
  std::function<void(int rank, schedule::Plan* plan)> mutate;
};

struct CheckStats {
  size_t steps = 0;  // over all ranks
  size_t maxStepsPerRank = 0;
  size_t maxLanesPerRank = 0;
  size_t maxScratchElems = 0;
  size_t elementsMoved = 0;      // over all messages
  size_t maxSentPerRank = 0;     // elements the busiest rank sends
  size_t maxReducedPerRank = 0;  // elements the busiest rank receives and reduces
  // Length of the longest chain of message latencies: a receiving step takes
  // one unit of time once its lane's previous step, its message and its FIFO
  // slot are there; steps that only send or copy take none. This is the
  // number of alphas of the cost formulas (docs/algorithms.md); lanes of a
  // rank count as concurrent.
  size_t criticalPathSteps = 0;
};

// Empty string: the plans of all ranks are correct. Otherwise what went wrong.
// `shape.rank` is ignored: every rank of shape.nranks is generated and run.
std::string checkCollective(const schedule::CollShape& shape, const CheckOptions& opts = {}, CheckStats* stats = nullptr);

// The same guarantees for the PeerAccess algorithm, whose steps address every
// rank's buffers and exchange no message (peer_plan_checker.cc); it adds that
// no two lanes touch an element where either writes it. checkCollective uses
// it for that algorithm. At most 64 ranks.
std::string checkPeerAccessPlans(const schedule::CollShape& shape, const CheckOptions& opts, CheckStats* stats);

// "AllReduce/Ring nranks=4 count=20 root=0 chunk=2 channels=1"
std::string describeShape(const schedule::CollShape& shape);

}  // namespace braid
