// Naming both sides when ranks called different things. Messages carry their
// operation's fingerprint (engine/fingerprint.h), so a rank that receives one
// of another call knows it; the rank that sent it answers with its call from
// the communicator's recent calls. Where no message of either call crosses
// (each rank waits for the other, in its lanes or while setting up FIFOs and
// connections), a rank that has not moved for a second sends the rank it
// waits on a probe with its call. That rank finds a mismatch when its own
// call of the same number differs; if it has itself waited a second, it adds
// its own call and passes the probe on to the rank it waits for, and the rank
// that finds itself waiting for one already in the chain has found a cycle of
// ranks that each wait for the next: they cannot all be in the calls they
// should be. Either way it tells every rank.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/result.h"
#include "bootstrap/bootstrap.h"
#include "engine/task.h"

struct ncclComm;

namespace braid::engine {

// Records that `t` (of comm) stamps `fingerprint` on its messages.
void rememberCall(ncclComm* comm, const Task& t, uint32_t fingerprint);

// "rank R called X as operation #k".
std::string calledText(const ncclComm* comm, const Task& t);

// The recent call of this rank whose messages carry `fingerprint`, as
// calledText, or a sentence saying it is no longer known.
std::string callWithFingerprint(const ncclComm* comm, uint32_t fingerprint);

// This rank's answer to a Received mismatch notice naming it as the sender:
// a Paired notice whose text names both calls.
bootstrap::MismatchNotice answerOf(const ncclComm* comm, const bootstrap::MismatchNotice& received);

// Whether `notice` tells of ranks that called different things in an
// operation after `lastSequence`, the last one this rank is running: those
// it runs can still complete (every rank that reached the later one sent all
// it had for them), and the notice stops the later one when it runs. A wait
// on the reporter itself still ends at BRAID_TIMEOUT. False for every other
// notice, and for one asking this rank to answer with its own call.
bool concernsALaterCall(const ncclComm* comm, const std::string& notice, uint64_t lastSequence);

// What this rank is stuck on, for the probes it answers.
struct Stall {
  bool long_ = false;                    // it has not moved for a second
  std::function<bool(int peer)> waitsOn;  // whether it waits for `peer`
  int waitingFor = -1;                    // a rank it waits for (where probes go on)
  const Task* task = nullptr;             // the call it waits in (null: its latest)
  std::string at;                         // calledText of that call
};

// "rank R called X as operation #k" of the call `t`, or of this rank's latest
// call when `t` is null.
std::string currentCallText(const ncclComm* comm, const Task* t);

// Tells `peer` that this rank waits on it in `t` (its latest call when null).
void sendCallProbe(ncclComm* comm, int peer, const Task* t = nullptr);

// Reads the probes that arrived and judges them against this rank's recent
// calls and `stall`; a mismatch or a deadlock is told to every rank (a paired
// mismatch notice) and returned as the error.
Result answerCallProbes(ncclComm* comm, const Stall& stall);

}  // namespace braid::engine
