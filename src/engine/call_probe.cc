#include "engine/call_probe.h"

#include <cstdio>

#include "engine/comm.h"
#include "engine/fingerprint.h"

namespace braid {

namespace {

// What a stalled rank sends (kTagCallProbe).
struct CallProbe {
  uint64_t callNumber = 0;  // of a collective (Task::callNumber)
  uint32_t fingerprint = 0;
  int32_t rank = -1;
  char call[240] = {};  // calledText
};

bool isCollective(const Task& t) { return t.coll != Collective::Send && t.coll != Collective::Recv; }

const RecentCall* latestCollective(const ncclComm* comm) {
  const RecentCall* latest = nullptr;
  for (const RecentCall& r : comm->recentCalls)
    if (r.task.sequence != 0 && isCollective(r.task) && (!latest || r.task.sequence > latest->task.sequence))
      latest = &r;
  return latest;
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

void sendCallProbe(ncclComm* comm, int peer, const Task* t) {
  const RecentCall* latest = latestCollective(comm);
  CallProbe p;
  if (t && isCollective(*t)) {
    p.callNumber = t->callNumber;
    for (const RecentCall& r : comm->recentCalls)
      if (r.task.sequence == t->sequence) p.fingerprint = r.fingerprint;
  } else if (latest) {
    t = &latest->task;
    p.callNumber = t->callNumber;
    p.fingerprint = latest->fingerprint;
  } else {
    return;
  }
  p.rank = comm->rank;
  snprintf(p.call, sizeof p.call, "%s", calledText(comm, *t).c_str());
  (void)comm->bootstrap->send(peer, kTagCallProbe, &p, sizeof p);
}

Result answerCallProbes(ncclComm* comm) {
  if (!comm->bootstrap) return Result::success();
  for (int peer = 0; peer < comm->nranks; ++peer) {
    bool ready = false;
    CallProbe p;
    if (peer == comm->rank || !comm->bootstrap->waitFor(peer, kTagCallProbe, 0, &ready).ok() || !ready ||
        !comm->bootstrap->recv(peer, kTagCallProbe, &p, sizeof p, Clock::now()).ok())
      continue;
    p.call[sizeof p.call - 1] = '\0';
    for (const RecentCall& r : comm->recentCalls) {
      if (r.task.sequence == 0 || !isCollective(r.task) || r.task.callNumber != p.callNumber ||
          r.fingerprint == p.fingerprint)
        continue;
      MismatchNotice pair;
      pair.kind = MismatchNotice::Paired;
      pair.sender = comm->rank;
      pair.reporter = p.rank;
      pair.fingerprint = p.fingerprint;
      pair.text = calledText(comm, r.task) + " while " + p.call;
      comm->bootstrap->notifyFailure(encodeMismatchNotice(pair), -1, Clock::now() + std::chrono::seconds(1));
      return fail(ncclInvalidUsage, "%s", pair.text.c_str());
    }
  }
  return Result::success();
}

}  // namespace braid
