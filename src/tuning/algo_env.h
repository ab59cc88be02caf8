// NCCL_ALGO and NCCL_PROTO, parsed with NCCL's syntax:
//   [^]name,name,...              one list for every collective
//   coll:[^]name,...;coll:...     per-collective lists (NCCL 2.24+); the first
//                                 segment alone may lack a prefix and is then
//                                 the default the others override
// A leading ^ excludes the names instead of selecting them. Names are
// case-insensitive. See docs/tuning.md for braid's names and what the
// protocols mean on the host path.
#pragma once

#include <cstdint>
#include <string>

#include "schedule/generate.h"

namespace braid::tuning {

// The chunk-size class of a call. A FIFO slot is fixed when a connection is
// made, so a protocol bounds the chunk (the largest step) the planner picks:
//   LL     chunks up to 8 KiB (latency: many small steps)
//   LL128  chunks above 8 KiB up to 64 KiB
//   Simple chunks above 64 KiB up to one whole slot (NCCL_BUFFSIZE / BRAID_NSLOTS)
enum class Protocol : uint8_t { LL, LL128, Simple };
constexpr int kNumProtocols = 3;
const char* protocolName(Protocol p);

constexpr int kNumCollectives = static_cast<int>(schedule::Collective::Recv) + 1;

struct AlgoFilter {
  // Per collective, bit (1 << Algorithm) / (1 << Protocol) set when allowed.
  uint8_t algos[kNumCollectives];
  uint8_t protos[kNumCollectives];
  // The user's variable named this collective (globally or by prefix).
  bool algoForced[kNumCollectives];
  bool protoForced[kNumCollectives];

  AlgoFilter();  // allows everything
  bool allows(schedule::Collective c, schedule::Algorithm a) const {
    return (algos[static_cast<int>(c)] >> static_cast<int>(a)) & 1;
  }
  bool allows(schedule::Collective c, Protocol p) const {
    return (protos[static_cast<int>(c)] >> static_cast<int>(p)) & 1;
  }
};

// Either argument may be nullptr or empty (unset). Unknown names warn and are
// ignored; NCCL algorithms braid lacks (CollnetDirect, CollnetChain, NVLS,
// NVLSTree) are ignored with one INFO line; PAT selects RecursiveDoubling and
// HalvingDoubling (where a collective has them). An unprefixed NCCL_ALGO list
// leaves AllToAll, Gather, Scatter, Send and Recv alone (they have only Direct),
// as NCCL_ALGO does not govern NCCL's point-to-point operations. The prefixes
// send, recv and sendrecv all apply to both Send and Recv, so that the two ends
// of a message always cut it alike.
AlgoFilter parseAlgoFilter(const char* ncclAlgo, const char* ncclProto);

// parseAlgoFilter(getenv("NCCL_ALGO"), getenv("NCCL_PROTO")), read now.
AlgoFilter algoFilterFromEnv();
// The same, parsed once per process (logged at INFO ENV|TUNING when set).
const AlgoFilter& envAlgoFilter();

// "AllReduce: Ring,Tree/LL,Simple; Broadcast: ..." for the collectives the
// filter restricts; "no restriction" otherwise.
std::string describeAlgoFilter(const AlgoFilter& f);

}  // namespace braid::tuning
