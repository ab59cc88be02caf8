// Creating a braid communicator for a process group through the c10d store.
#pragma once

#include <nccl.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace braid_torch {

// Collective over the group. Rank 0 makes a private unique id (its own
// bootstrap root, whatever NCCL_COMM_ID says: every group needs its own) and
// publishes it in `store`; the others read it; the last reader removes the keys
// so that a group re-created under the same store prefix never reads a stale id.
// `timeout` bounds the creation and every later wait of the communicator.
// Uses braidGetPrivateUniqueId and braidCommSetTimeout where the library has
// them; the environment is touched only where the library's API has no word
// (see bootstrap.cc).
ncclComm_t createCommunicator(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                              std::chrono::milliseconds timeout);

}  // namespace braid_torch
