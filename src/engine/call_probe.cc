#include "engine/call_probe.h"

#include <cstdio>

#include "engine/comm.h"
#include "engine/fingerprint.h"

namespace braid::engine {

namespace {

// What a stalled rank sends the rank it waits on (kTagCallProbe): a chain of
// ranks, each waiting a second or more for the next, the last for the rank
// that gets it.
struct ProbeHop {
  int32_t rank = -1;
  uint32_t fingerprint = 0;
  uint64_t callNumber = 0;  // Task::callNumber, of a collective (0: a send or receive)
  char call[200] = {};      // calledText
};
constexpr uint32_t kMaxHops = 8;
struct CallProbe {
  uint32_t hops = 0;
  ProbeHop hop[kMaxHops];
};

bool isCollective(const Task& t) { return !isPointToPoint(t.coll); }

const RecentCall* latestCall(const ncclComm* comm) {
  const RecentCall* latest = nullptr;
  for (const RecentCall& r : comm->recentCalls)
    if (r.task.sequence != 0 && (!latest || r.task.sequence > latest->task.sequence)) latest = &r;
  return latest;
}

Result tellEveryRank(ncclComm* comm, const ProbeHop& to, const std::string& text) {
  bootstrap::MismatchNotice pair;
  pair.kind = bootstrap::MismatchNotice::Paired;
  pair.sender = comm->rank;
  pair.reporter = to.rank;
  pair.fingerprint = to.fingerprint;
  pair.text = text;
  comm->bootstrap->notifyFailure(encodeMismatchNotice(pair), -1, Clock::now() + std::chrono::seconds(1));
  return fail(ncclInvalidUsage, "%s", text.c_str());
}

ProbeHop hopOf(const ncclComm* comm, const Task& t) {
  ProbeHop h;
  h.rank = comm->rank;
  if (isCollective(t)) {
    h.callNumber = t.callNumber;
    for (const RecentCall& r : comm->recentCalls)
      if (r.task.sequence == t.sequence) h.fingerprint = r.fingerprint;
  }
  snprintf(h.call, sizeof h.call, "%s", calledText(comm, t).c_str());
  return h;
}

// Hops first..last of the chain, then this rank, each waiting for the next,
// and the first waiting for this one.
std::string cycleText(const CallProbe& p, uint32_t first, int me, const Stall& stall) {
  std::string text;
  for (uint32_t i = first; i < p.hops; ++i) {
    const int next = i + 1 < p.hops ? p.hop[i + 1].rank : me;
    text += std::string(p.hop[i].call) + " and waits for rank " + std::to_string(next) + "; ";
  }
  return text + stall.at + " and waits for rank " + std::to_string(p.hop[first].rank) +
         ": the ranks wait for each other in a cycle (their calls, or their order, differ)";
}

}  // namespace

void rememberCall(ncclComm* comm, const Task& t, uint32_t fingerprint) {
  RecentCall& r = comm->recentCalls[t.sequence % comm->recentCalls.size()];
  r.fingerprint = fingerprint;
  r.task = t;
}

std::string calledText(const ncclComm* comm, const Task& t) {
  return "rank " + std::to_string(comm->rank) + " called " + describeCall(t) + " as operation #" +
         std::to_string(t.sequence);
}

std::string callWithFingerprint(const ncclComm* comm, uint32_t fingerprint) {
  for (const RecentCall& r : comm->recentCalls)
    if (r.task.sequence != 0 && r.fingerprint == fingerprint) return calledText(comm, r.task);
  return "rank " + std::to_string(comm->rank) + " had sent it a message of a call it no longer knows";
}

std::string currentCallText(const ncclComm* comm, const Task* t) {
  if (t) return calledText(comm, *t);
  const RecentCall* latest = latestCall(comm);
  return latest ? calledText(comm, latest->task) : "rank " + std::to_string(comm->rank) + " (no call yet)";
}

bootstrap::MismatchNotice answerOf(const ncclComm* comm, const bootstrap::MismatchNotice& received) {
  bootstrap::MismatchNotice pair = received;
  pair.kind = bootstrap::MismatchNotice::Paired;
  pair.text = callWithFingerprint(comm, received.fingerprint) + " while " + received.text;
  return pair;
}

bool concernsALaterCall(const ncclComm* comm, const std::string& notice, uint64_t lastSequence) {
  bootstrap::MismatchNotice n;
  if (!parseMismatchNotice(notice, &n) || n.operation == 0) return false;
  if (n.kind == bootstrap::MismatchNotice::Received && n.sender == comm->rank) return false;
  return n.operation > lastSequence;
}

void sendCallProbe(ncclComm* comm, int peer, const Task* t) {
  if (!t) {
    const RecentCall* latest = latestCall(comm);
    if (!latest) return;
    t = &latest->task;
  }
  CallProbe p;
  p.hop[p.hops++] = hopOf(comm, *t);
  (void)comm->bootstrap->send(peer, bootstrap::kTagCallProbe, &p, sizeof p);
}

Result answerCallProbes(ncclComm* comm, const Stall& stall) {
  if (!comm->bootstrap) return Result::success();
  for (int peer = 0; peer < comm->nranks; ++peer) {
    bool ready = false;
    CallProbe p;
    if (peer == comm->rank || !comm->bootstrap->waitFor(peer, bootstrap::kTagCallProbe, 0, &ready).ok() || !ready ||
        !comm->bootstrap->recv(peer, bootstrap::kTagCallProbe, &p, sizeof p, Clock::now()).ok() || p.hops == 0 ||
        p.hops > kMaxHops)
      continue;
    for (uint32_t i = 0; i < p.hops; ++i) p.hop[i].call[sizeof p.hop[i].call - 1] = '\0';
    // The rank that sent it: its collective of the same number as one of ours.
    const ProbeHop& last = p.hop[p.hops - 1];
    bool sameNumber = false;
    for (const RecentCall& r : comm->recentCalls) {
      if (r.task.sequence == 0 || !isCollective(r.task) || last.callNumber == 0 || r.task.callNumber != last.callNumber)
        continue;
      sameNumber = true;
      if (r.fingerprint != last.fingerprint)
        return tellEveryRank(comm, last, calledText(comm, r.task) + " while " + last.call);
    }
    if (sameNumber || !stall.long_ || !stall.waitsOn) continue;
    // A cycle: this rank, stalled too, waits for a rank of the chain.
    for (uint32_t i = 0; i < p.hops; ++i)
      if (stall.waitsOn(p.hop[i].rank)) return tellEveryRank(comm, last, cycleText(p, i, comm->rank, stall));
    // Else the chain goes on to the rank this one waits for.
    const RecentCall* latest = latestCall(comm);
    const Task* t = stall.task ? stall.task : latest ? &latest->task : nullptr;
    if (p.hops < kMaxHops && stall.waitingFor >= 0 && t) {
      p.hop[p.hops++] = hopOf(comm, *t);
      (void)comm->bootstrap->send(stall.waitingFor, bootstrap::kTagCallProbe, &p, sizeof p);
    }
  }
  return Result::success();
}

}  // namespace braid::engine
