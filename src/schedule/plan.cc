#include "schedule/plan.h"

#include <sstream>

namespace braid::schedule {

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "AllReduce";
    case Collective::ReduceScatter: return "ReduceScatter";
    case Collective::AllGather: return "AllGather";
    case Collective::Broadcast: return "Broadcast";
    case Collective::Reduce: return "Reduce";
    case Collective::AllToAll: return "AllToAll";
    case Collective::Gather: return "Gather";
    case Collective::Scatter: return "Scatter";
    case Collective::Send: return "Send";
    case Collective::Recv: return "Recv";
  }
  return "?";
}

bool isReduction(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce;
}

const char* stepKindName(StepKind k) {
  switch (k) {
    case StepKind::Send: return "send";
    case StepKind::Recv: return "recv";
    case StepKind::RecvReduceSend: return "recvReduceSend";
    case StepKind::RecvReduceCopy: return "recvReduceCopy";
    case StepKind::RecvReduceCopySend: return "recvReduceCopySend";
    case StepKind::RecvCopySend: return "recvCopySend";
    case StepKind::Copy: return "copy";
    case StepKind::PeerReduce: return "peerReduce";
  }
  return "?";
}

bool stepSends(StepKind k) {
  return k == StepKind::Send || k == StepKind::RecvReduceSend || k == StepKind::RecvReduceCopySend ||
         k == StepKind::RecvCopySend;
}

bool stepReceives(StepKind k) { return k != StepKind::Send && k != StepKind::Copy && k != StepKind::PeerReduce; }

bool stepReadsSrc(StepKind k) {
  return k == StepKind::Send || k == StepKind::RecvReduceSend || k == StepKind::RecvReduceCopy ||
         k == StepKind::RecvReduceCopySend || k == StepKind::Copy || k == StepKind::PeerReduce;
}

bool stepWritesDst(StepKind k) {
  return k == StepKind::Recv || k == StepKind::RecvReduceCopy || k == StepKind::RecvReduceCopySend ||
         k == StepKind::RecvCopySend || k == StepKind::Copy || k == StepKind::PeerReduce;
}

namespace {
const char* bufferName(Buffer b) {
  return b == Buffer::Input ? "in" : b == Buffer::Output ? "out" : "scratch";
}
const char* laneKindName(LaneKind k) {
  switch (k) {
    case LaneKind::Channel: return "channel";
    case LaneKind::PeerSend: return "send-to";
    case LaneKind::PeerRecv: return "recv-from";
  }
  return "?";
}
}  // namespace

std::string describePlan(const Plan& plan) {
  std::ostringstream os;
  for (const Lane& lane : plan.lanes) {
    os << "lane " << laneKindName(lane.key.kind) << " " << lane.key.index << " (connections on channel "
       << lane.channel << "), " << lane.steps.size() << " steps\n";
    for (const Step& s : lane.steps) {
      os << "  " << stepKindName(s.kind);
      if (stepReceives(s.kind)) os << " from " << s.recvPeer;
      if (stepSends(s.kind)) os << " to " << s.sendPeer;
      if (stepReadsSrc(s.kind)) os << " src=" << bufferName(s.src.buffer) << "+" << s.src.offset;
      if (stepWritesDst(s.kind)) os << " dst=" << bufferName(s.dst.buffer) << "+" << s.dst.offset;
      os << " n=" << s.count;
      if (s.srcIsContribution) os << " contrib";
      if (s.final) os << " final";
      if (s.keepsWire) os << " keeps-wire";
      if (s.peerSrc) os << " src-at-every-rank";
      if (s.peerDst) os << " dst-at-every-rank";
      os << "\n";
    }
  }
  return os.str();
}

}  // namespace braid::schedule
