// Groups: every call is an implicit group; ncclGroupStart/End nest and may span
// communicators. Tasks wait in this thread's group until the outermost End.
#pragma once

#include <functional>

#include "base/result.h"
#include "engine/task.h"

namespace braid::core {

void groupStart();
// Runs the group if this was the outermost End.
Result groupEnd();
// Ends the group like groupEnd, but runs only its inits: the collectives are
// dropped and the cost model's estimate of their time is returned.
Result groupSimulateEnd(float* estimatedMicros);
bool inGroup();

// Remembers a failed call inside an open group: the group then reports it at
// ncclGroupEnd instead of running half of the user's operations.
void groupFail(const Result& r);

// Adds a validated task; runs it at once when no group is open.
Result enqueueTask(const engine::Task& task);

// A communicator initialisation deferred to the end of the group, so that one
// thread can create several ranks of one job (they must join concurrently).
Result enqueueInit(std::function<Result()> init);

}  // namespace braid::core
