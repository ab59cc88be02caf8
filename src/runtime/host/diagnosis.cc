#include "runtime/host/diagnosis.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/comm.h"
#include "core/log.h"

namespace braid {

namespace {

// What one rank tells rank 0 after a timeout.
struct WaitReport {
  int32_t rank = -1;
  int32_t waitingFor = -1;  // the peer it waits on, -1 if none
  uint64_t opCount = 0;     // operations it has issued on this communicator
};

int waitedPeer(const LaneWork& lane) {
  const Step& s = lane.steps[lane.next].step;
  return stepReceives(s.kind) ? s.recvPeer : s.sendPeer;
}

const LaneWork* firstWaitingLane(const HostWork& work, const ncclComm* comm) {
  for (const LaneWork& lane : work.lanes)
    if (lane.comm == comm && lane.next < lane.steps.size()) return &lane;
  return nullptr;
}

std::string opText(const BoundOp& op) {
  char text[160];
  snprintf(text, sizeof text, "op #%llu %s(count=%zu, %s)", static_cast<unsigned long long>(op.sequence),
           collectiveName(op.coll), op.count, typeName(op.type));
  return text;
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace


std::string describeWaits(const HostWork& work) {
  std::string out;
  for (const LaneWork& lane : work.lanes) {
    if (lane.next >= lane.steps.size()) continue;
    const ncclComm* comm = lane.comm;
    const BoundStep& b = lane.steps[lane.next];
    const PeerInfo& self = comm->peers[comm->rank];
    char line[400];
    snprintf(line, sizeof line,
             "braid diagnosis: rank %d of %d (pid %d on host %.64s): %s: lane %s %d step %zu of %zu (%s, "
             "%zu elements) waits %s rank %d\n",
             comm->rank, comm->nranks, self.pid, self.hostname, opText(work.ops[b.op]).c_str(),
             lane.stage < 0 ? "peer" : "channel", lane.channel, lane.next + 1, lane.steps.size(),
             stepKindName(b.step.kind), b.step.count, stepReceives(b.step.kind) ? "for data from" : "to send to",
             waitedPeer(lane));
    out += line;
  }
  if (out.empty()) out = "braid diagnosis: every lane is done; waiting for sends to leave this process\n";
  return out;
}

void summarizeTimeout(const HostWork& work) {
  std::vector<ncclComm*> comms;
  for (const LaneWork& lane : work.lanes)
    if (std::find(comms.begin(), comms.end(), lane.comm) == comms.end()) comms.push_back(lane.comm);
  for (ncclComm* comm : comms) {
    if (!comm->bootstrap) continue;
    const LaneWork* waiting = firstWaitingLane(work, comm);
    WaitReport mine{comm->rank, waiting ? waitedPeer(*waiting) : -1, comm->opCount};
    // Rank 0 waits for the reports at most 3 s, and never longer than the timeout
    // itself: a short timeout asks for a prompt answer.
    const double wait = std::min(3.0, comm->settings.timeoutSeconds);
    const Deadline deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(wait * 1000));
    if (comm->rank != 0) {
      (void)comm->bootstrap->send(0, kTagDiagnosis, &mine, sizeof mine);
      continue;
    }
    std::vector<int> missing, behind, waitingRanks;
    for (int r = 1; r < comm->nranks; ++r) {
      WaitReport rep;
      if (!comm->bootstrap->recv(r, kTagDiagnosis, &rep, sizeof rep, deadline).ok()) {
        missing.push_back(r);
      } else if (rep.opCount < mine.opCount) {
        behind.push_back(r);
      } else {
        waitingRanks.push_back(r);
      }
    }
    fprintf(stderr, "braid timeout summary (rank 0, op #%llu of a %d-rank communicator): %s%s%s%s%s%s\n",
               static_cast<unsigned long long>(mine.opCount), comm->nranks,
               missing.empty() ? "" : "never arrived (no report: dead, or hung outside braid): ranks ",
               rankList(missing).c_str(), behind.empty() ? "" : "; still at an earlier operation: ranks ",
               rankList(behind).c_str(), waitingRanks.empty() ? "" : "; waiting like rank 0: ranks ",
               rankList(waitingRanks).c_str());
  }
}

}  // namespace braid
