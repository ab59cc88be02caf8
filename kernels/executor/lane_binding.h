// Host side: turns a plan's lane into the interpreter's flat steps, with each
// distinct send peer and receive peer given a port index. The caller makes a
// Port per index for the FIFO (peer, lane.channel, direction) and fills in a
// LaneExec (plan_interpreter.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/executor/plan_interpreter.h"
#include "reduce/wire_format.h"
#include "schedule/plan.h"

namespace braid::executor {

struct BoundLane {
  int32_t channel = 0;
  std::vector<ExecStep> steps;
  std::vector<int32_t> sendPeers;  // port index -> peer rank
  std::vector<int32_t> recvPeers;
  std::vector<Protocol> sendProtocols;  // port index -> the protocol of its FIFO
  std::vector<Protocol> recvProtocols;
  uint64_t maxLLMessageBytes = 0;  // the largest LL message a step sends or receives
};

namespace detail {
// A port is a FIFO (peer, lane channel, direction, protocol).
inline int32_t portOf(std::vector<int32_t>& peers, std::vector<Protocol>& protocols, int32_t peer,
                      Protocol protocol) {
  for (size_t i = 0; i < peers.size(); ++i)
    if (peers[i] == peer && protocols[i] == protocol) return int32_t(i);
  peers.push_back(peer);
  protocols.push_back(protocol);
  return int32_t(peers.size() - 1);
}
}  // namespace detail

// Appends the steps of one operation's lane to `b` (its steps naming
// operation `op` and moving their messages with `protocol`), giving each new
// (peer, protocol) a port. Empty string on success; otherwise why the lane
// cannot run with messages of at most payloadBytes. A message holds its
// elements of elemSize bytes, or their narrowing when `wire` is one.
inline std::string appendLane(const schedule::Lane& lane, uint32_t op, Protocol protocol, size_t elemSize,
                              uint64_t payloadBytes, BoundLane* b, reduce::WireType wire = reduce::WireType::None) {
  for (size_t i = 0; i < lane.steps.size(); ++i) {
    const schedule::Step& s = lane.steps[i];
    ExecStep e;
    e.kind = s.kind;
    e.srcBuffer = s.src.buffer;
    e.dstBuffer = s.dst.buffer;
    e.srcOffset = s.src.offset;
    e.dstOffset = s.dst.offset;
    e.count = s.count;
    e.op = op;
    e.flags = uint8_t((s.srcIsContribution ? kStepContribution : 0) | (s.final ? kStepFinal : 0) |
                      (s.peerSrc ? kStepPeerSrc : 0) | (s.peerDst ? kStepPeerDst : 0) |
                      (s.keepsWire ? kStepKeepsWire : 0));
    const bool sends = stepSendsKind(s.kind);
    const bool recvs = stepReceivesKind(s.kind);
    if ((sends && s.sendPeer < 0) || (recvs && s.recvPeer < 0))
      return "step " + std::to_string(i) + " (" + stepKindName(s.kind) + ") has no peer";
    if (sends) e.sendPort = detail::portOf(b->sendPeers, b->sendProtocols, s.sendPeer, protocol);
    if (recvs) e.recvPort = detail::portOf(b->recvPeers, b->recvProtocols, s.recvPeer, protocol);
    if (sends || recvs) {
      const uint64_t bytes = wire != reduce::WireType::None ? wireBytes(wire, s.count) : uint64_t(s.count) * elemSize;
      if (bytes > payloadBytes)
        return "step " + std::to_string(i) + " moves " + std::to_string(bytes) + " bytes, more than a slot's " +
               std::to_string(payloadBytes);
      if (protocol == Protocol::LL) b->maxLLMessageBytes = std::max(b->maxLLMessageBytes, bytes);
    }
    b->steps.push_back(e);
  }
  return "";
}

// One lane of one operation (operation 0).
inline std::string bindLane(const schedule::Lane& lane, Protocol protocol, size_t elemSize, uint64_t payloadBytes,
                            BoundLane* out) {
  BoundLane b;
  b.channel = lane.channel;
  std::string why = appendLane(lane, 0, protocol, elemSize, payloadBytes, &b);
  if (why.empty()) *out = std::move(b);
  return why;
}

}  // namespace braid::executor
