// Creating, splitting and tearing down communicators.
#pragma once

#include <nccl.h>

#include "engine/comm.h"

namespace braid::core {

// Settings from the environment, overridden by the user's config (which may be
// NULL). Rejects a config not made with NCCL_CONFIG_INITIALIZER.
Result makeCommSettings(const ncclConfig_t* config, engine::CommSettings* out);

// Bytes of each per-peer FIFO (all-to-all, gather, scatter, send/recv use one
// per peer and direction). At NCCL_BUFFSIZE each, an all-to-all among 64 ranks
// of one host would map 64 x 63 FIFOs of 4 MiB, 16 GiB of /dev/shm; so they
// share a budget of 64 MiB per rank, each between 256 KiB and the ring's FIFO
// size (unchanged up to 9 ranks). BRAID_PEER_BUFFSIZE overrides it.
size_t peerFifoBytes(int nranks, size_t ringFifoBytes);

// Joins the job and fills `comm` (already allocated and registered). On failure
// (an exception included: it may run on a thread of its own) the communicator
// is left in the Failed state with the message recorded.
Result initCommunicator(ncclComm* comm, const ncclUniqueId& id, int nranks, int rank);

// Creates rank `rank`'s communicator of the job `id` into *out: with blocking
// settings it joins now (or at the end of the open group); otherwise on a
// thread of its own (*inProgress set), until ncclCommGetAsyncError says how
// it went.
Result startCommunicator(const ncclUniqueId& id, int nranks, int rank, const engine::CommSettings& settings,
                         ncclComm** out, bool* inProgress);

// ncclCommInitAll: ndev ranks of a private job, created together on threads
// (each waits for the others); all or none of comms[] are set.
Result initAllCommunicators(int ndev, const int* devlist, engine::CommSettings settings, ncclComm** comms);

// Allocates and registers an empty communicator in the Initializing state.
ncclComm* allocateComm(int rank, int nranks, const engine::CommSettings& settings);

// Collective over `parent`: every rank passes its color and key; ranks with
// color NCCL_SPLIT_NOCOLOR get NULL.
// ncclCommShrink: a communicator of every parent rank not in `exclude`, in parent
// rank order. Works on a communicator in error (after a peer failure) and never
// waits on an excluded rank.
Result shrinkCommunicator(ncclComm* parent, const int* exclude, int excludeCount, const engine::CommSettings& settings,
                          ncclComm** out);

Result splitCommunicator(ncclComm* parent, int color, int key, const engine::CommSettings& settings, ncclComm** out);

// Releases every resource; the handle is invalid afterwards.
void destroyComm(ncclComm* comm);

// ncclCommAbort: stops every wait on the communicator, gives a call running on
// another thread up to 30 s to return, and destroys it.
void abortCommunicator(ncclComm* comm);

// ncclCommRevoke: stops the communicator's operations for good (a waiting call
// returns an error within a moment) but keeps its bootstrap, so that
// ncclCommShrink can still build a communicator of the survivors from it.
void revokeCommunicator(ncclComm* comm);

// Before ncclCommShrink: host operations complete before their call returns;
// device calls still queued are stopped (`abortQueued`) or finish first.
void settleDeviceWork(ncclComm* comm, bool abortQueued);

}  // namespace braid::core
