// Naming both sides when ranks called different things. Messages carry their
// operation's fingerprint (engine/fingerprint.h), so a rank that receives one
// of another call knows it; the rank that sent it answers with its call from
// the communicator's recent calls. Where no message of either call crosses
// (each rank waits for the other, in its lanes or while setting up FIFOs), a
// rank that has not moved for a second sends the rank it waits on a probe
// with its call, and that rank compares it with its own call of the same
// number. Either way the rank that sees both calls tells every rank.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"
#include "engine/task.h"

struct ncclComm;

namespace braid {

// Records that `t` (of comm) stamps `fingerprint` on its messages.
void rememberCall(ncclComm* comm, const Task& t, uint32_t fingerprint);

// "rank R called X as operation #k".
std::string calledText(const ncclComm* comm, const Task& t);

// The recent call of this rank whose messages carry `fingerprint`, as
// calledText, or a sentence saying it is no longer known.
std::string callWithFingerprint(const ncclComm* comm, uint32_t fingerprint);

// Tells `peer` that this rank waits on it in its latest collective (in `t`
// when given).
void sendCallProbe(ncclComm* comm, int peer, const Task* t = nullptr);

// Reads the probes that arrived; one naming a collective of the same number
// as one of this rank's recent ones, with another fingerprint, is a mismatch:
// every rank is told (a paired mismatch notice) and the error is returned.
Result answerCallProbes(ncclComm* comm);

}  // namespace braid
