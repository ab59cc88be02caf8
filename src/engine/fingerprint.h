// What ranks must agree on for one call, as the 32-bit fingerprint the engine
// stamps on every message of it and checks on every message it receives
// (kernels/executor/fifo_view.h): the call (collective, count, datatype,
// reduction, root), its plan (algorithm, chunk, channels, protocol) and its
// number, which every rank counts alike. Ranks whose calls differ exchange
// messages whose fingerprints differ, and fail instead of mixing their data.
#pragma once

#include <cstdint>
#include <string>

#include "engine/task.h"
#include "kernels/executor/fifo_view.h"
#include "schedule/generate.h"

namespace braid::engine {

// Send and Recv, which pair up per peer rather than across the communicator.
bool isPointToPoint(schedule::Collective c);
// The collectives whose `root` means something (Task::root).
bool usesRoot(schedule::Collective c);
// One step of the 64-bit hash the fingerprints (and BRAID_CHECK's digest) use.
uint64_t mixHash(uint64_t h, uint64_t v);

// Numbers a call the way its peers number theirs: a collective by the
// communicator's collectives so far; a send by the sends to its peer so far,
// a receive by the receives from its peer (they pair up in order). Advances
// the count.
uint64_t nextCallNumber(ncclComm* comm, const Task& t);

// The fingerprint of the call's shape and plan, without its number: fixed for
// a cached plan. A send and the receive that matches it give the same value.
uint32_t shapeFingerprint(const Task& t, const schedule::CollShape& shape, executor::Protocol protocol);

// The fingerprint of one call: its shape's, and its number.
uint32_t callFingerprint(uint32_t shape, uint64_t callNumber);

// "AllReduce(count=1024, float32, sum)", "Broadcast(count=8, int32, root 0)",
// "Send(count=4, float32, to rank 1)".
std::string describeCall(schedule::Collective coll, uint64_t count, ncclDataType_t type, int userOp, int root);
std::string describeCall(const Task& t);

}  // namespace braid::engine
