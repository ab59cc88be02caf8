// A plan is the data a collective becomes: per rank, lanes of ordered steps.
// Generators (pure functions, no I/O) produce it; the plan interpreter
// (kernels/executor) runs it; the symbolic checker proves it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace braid::schedule {

enum class Collective : uint8_t {
  AllReduce, ReduceScatter, AllGather, Broadcast, Reduce, AllToAll, Gather, Scatter, Send, Recv,
};
const char* collectiveName(Collective c);
bool isReduction(Collective c);

// The primitives a step can be. "Recv" reads the oldest slot from recvPeer,
// "Send" fills a slot for sendPeer; src/dst are local buffers.
enum class StepKind : uint8_t {
  Send,                // slot(sendPeer) = load(src)
  Recv,                // dst = slot(recvPeer)
  RecvReduceSend,      // slot(sendPeer) = slot(recvPeer) op load(src)
  RecvReduceCopy,      // dst = slot(recvPeer) op load(src)
  RecvReduceCopySend,  // dst = slot(sendPeer) = slot(recvPeer) op load(src)
  RecvCopySend,        // dst = slot(sendPeer) = slot(recvPeer)
  Copy,                // dst = load(src)
  // No FIFO: dst = the reduction, in rank order, of src at every rank
  // (Step::peerSrc; else this rank's src alone), written at every rank
  // (Step::peerDst; else this rank's dst alone), in one pass over the peers'
  // buffers in place. Only where every rank's buffers are addressable by the
  // lane and the ranks' calls run as one (the PeerAccess algorithm).
  PeerReduce,
};
const char* stepKindName(StepKind k);
bool stepSends(StepKind k);
bool stepReceives(StepKind k);
bool stepReadsSrc(StepKind k);
bool stepWritesDst(StepKind k);

// Scratch is memory of the plan's own (Plan::scratchElems elements), for partial
// results a rank keeps but must not write to the user's buffers (e.g. a tree
// node's sum of its children on a rank whose output buffer may be NULL).
enum class Buffer : uint8_t { Input, Output, Scratch };

struct BufferRef {
  Buffer buffer = Buffer::Input;
  size_t offset = 0;  // in elements
};

struct Step {
  StepKind kind = StepKind::Copy;
  int32_t sendPeer = -1;
  int32_t recvPeer = -1;
  BufferRef src;
  BufferRef dst;
  size_t count = 0;              // elements; every step moves at most one slot
  bool srcIsContribution = false;  // src holds this rank's raw input: apply PreMulSum
  bool final = false;              // produces the finished value: apply SumPostDiv
  bool peerSrc = false;            // PeerReduce: src is read at every rank
  bool peerDst = false;            // PeerReduce: dst is written at every rank
  // Under a wire type that narrows: the values the step stores are the
  // widened narrowing of what it computed (what it sends, where it sends),
  // so that a rank's own operand of a later step equals what its partner
  // received (recursive doubling). Without a wire type it means nothing.
  bool keepsWire = false;
};

// A lane is a sequence of steps run in order; lanes run concurrently.
// Invariant every generator keeps: within one operation, each FIFO (peer,
// channel, direction) is used by at most one lane, so messages cannot interleave.
// Channel lanes of consecutive operations on one communicator run one operation
// after the other; peer lanes (PeerSend/PeerRecv, one FIFO each) with equal keys
// are concatenated in call order instead, so that sends and receives of a group
// progress together. Every rank orders them alike, so FIFO order matches.
enum class LaneKind : uint8_t { Channel, PeerSend, PeerRecv };
struct LaneKey {
  LaneKind kind = LaneKind::Channel;
  int32_t index = 0;  // Channel: lane number within the operation; Peer*: the peer rank
  bool operator==(const LaneKey& o) const { return kind == o.kind && index == o.index; }
  bool operator<(const LaneKey& o) const {
    return kind != o.kind ? kind < o.kind : index < o.index;
  }
};

struct Lane {
  LaneKey key;
  int32_t channel = 0;  // which connections its steps use: (peer, channel)
  std::vector<Step> steps;
};

struct Plan {
  std::vector<Lane> lanes;
  size_t scratchElems = 0;  // size of Buffer::Scratch
};

// Channel used by point-to-point style lanes (send/recv, all-to-all, gather, scatter).
constexpr int32_t kPeerChannel = 63;

std::string describePlan(const Plan& plan);

}  // namespace braid::schedule
