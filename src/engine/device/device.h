// Collectives on device (CUDA) buffers, stage 1: the data is staged through
// pinned host memory and the host plan runs on a proxy thread per communicator,
// ordered on the user's stream (kernels/README.md). Built with CUDA, the cuda_*.cc
// files implement this; without it, no_cuda.cc answers "not built with CUDA".
//
// Host buffers keep the host path: while the application has not loaded the
// CUDA driver no device buffer can exist, and no CUDA call is made; once it has,
// whether CUDA is usable is decided once per process, and an unusable CUDA
// (no device) means every buffer is host memory.
#pragma once

#include <functional>
#include <vector>

#include "base/result.h"
#include "engine/task.h"

namespace braid::device {

// Built with CUDA and a CUDA device usable by this process (decided now, once).
bool deviceBuffersSupported();

// The PCI location of this thread's current CUDA device, packed for
// PeerInfo::gpuBusId; -1 without CUDA, or while the process has not loaded
// the CUDA driver (no CUDA call is made then).
int currentGpuBusId();
// That GPU's multiprocessor count; 0 where currentGpuBusId() is -1.
int currentGpuMultiprocessors();

// At communicator creation, where the process already uses CUDA and has a
// device: the communicator's device proxy with its pinned pools (and, for
// plan kernels, its Port slab), made now because later, with ranks on other
// threads, another rank's kernel may already wait, and these allocations may
// wait for the whole device. Elsewhere (no CUDA in use yet) they are made by
// the first device call. Not being able to make them now is no error.
void prepareDeviceWork(ncclComm* comm);

// Device or managed memory. False, without a CUDA call, when CUDA is not in use.
bool isDeviceMemory(const void* ptr);

// ncclMemAlloc's memory. With CUDA and a device: device memory on the calling
// thread's current device, as NCCL gives (programs such as nccl-tests fill it
// with cudaMemset); else page-aligned host memory, which every host collective
// takes. freeCommMemory frees either kind.
Result allocateCommMemory(void** ptr, size_t bytes);
Result freeCommMemory(void* ptr);

// Sets *device when any task of the group has device buffers. Fails with
// ncclInvalidArgument when a call mixes device and host buffers, the group mixes
// calls on device and on host buffers, or device buffers reach a library built
// without CUDA; with ncclInvalidUsage when a communicator's device calls are
// captured in a CUDA graph on more than one stream or only in part, or a
// stream's capture was invalidated.
Result classifyGroup(std::vector<engine::Task>& tasks, bool* device);

// Runs host work on the staged copies of one communicator's tasks (called on
// that communicator's proxy thread).
using StagedRunner = std::function<Result(const std::vector<engine::Task>&)>;

// Enqueues the group on its streams and returns: copies to pinned memory, the
// host work on each communicator's proxy thread, and the copies back. On a
// capturing stream all of it is captured, and the host work runs at each
// launch of the graph.
Result submitDeviceGroup(const std::vector<engine::Task>& tasks, const StagedRunner& run);

// Copies that return when done, for a call that runs on the host over device
// buffers (reproducible mode): the first waits for the work queued on
// `stream` (refused, naming `what`, while the stream is being captured).
Result copyFromDeviceNow(void* host, const void* device, size_t bytes, cudaStream_t stream, const char* what);
Result copyToDeviceNow(void* device, const void* host, size_t bytes, cudaStream_t stream);

// Returns once every device job of `comm` has run its host work, so that a host
// call that follows uses the connections in issue order.
void drainDeviceWork(ncclComm* comm);

// Around a call on host buffers: drains `comm`'s device work, and keeps graph
// launches that arrive meanwhile queued until resume, so that the host call
// and the proxy never use the connections at once.
void pauseDeviceWork(ncclComm* comm);
void resumeDeviceWork(ncclComm* comm);

// ncclCommAbort: releases stream-wait kernels of `comm` that still wait.
void abortDeviceWork(ncclComm* comm);

}  // namespace braid::device
