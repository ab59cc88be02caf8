// Stage 1 of device buffers (kernels/README.md): every call of a group copies
// what its rank contributes to pinned memory on the user's stream; each
// communicator's proxy thread runs the host plan on the pinned copies; a
// stream-wait kernel holds the stream until then, and the results are copied
// back on the stream. The API call returns at once, as NCCL's do.
//
// On a stream that captures a CUDA graph the same copies and kernel are
// captured, and a host function between them submits the job to the proxy at
// each launch of the graph, which therefore runs the calls again on the
// buffers' contents of that launch.
#include "engine/device/cuda_device_path.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "base/cuda_util.h"
#include "base/log.h"
#include "engine/comm.h"
#include "engine/device/cuda_capture.h"
#include "engine/device/cuda_lane_launch.h"
#include "engine/device/cuda_proxy.h"
#include "engine/device/device.h"
#include "engine/device/stage_span.h"
#include "engine/lanes/lane_executor.h"
#include "kernels/stream_wait.h"

namespace braid::device {

// Destruction frees pinned memory and queries events: it must not break a
// graph capture that another thread is recording.
void DeviceProxyDeleter::operator()(DeviceProxy* proxy) const {
  CaptureModeRelaxed relaxed;
  delete proxy;
}

Result deviceOfCalls(const std::vector<engine::Task>& tasks, const std::vector<size_t>& mine, int* device) {
  *device = -1;
  for (size_t i : mine) {
    const engine::Task& t = tasks[i];
    const StageSpan span = stageSpanOf(t, t.comm->rank, t.comm->nranks);
    for (const void* p : {span.inBytes ? t.sendbuff : nullptr,
                          span.outBytes ? static_cast<const void*>(t.recvbuff) : nullptr}) {
      if (p == nullptr) continue;
      const int d = deviceOfPointer(p);
      if (*device < 0) *device = d;
      if (d != *device)
        return fail(ncclInvalidArgument, "%s: rank %d's buffer %p is on device %d, but its other "
                    "buffers in this group are on device %d", collectiveName(t.coll), t.comm->rank, p,
                    d, *device);
    }
  }
  return Result::success();
}

Result proxyFor(ncclComm* comm, int device, DeviceProxy** out) {
  if (!comm->deviceProxy) {
    std::unique_ptr<DeviceProxy, DeviceProxyDeleter> proxy(new DeviceProxy(comm, device));
    BRAID_TRY(proxy->start());
    comm->deviceProxy = std::move(proxy);
    if (comm->settings.deviceKernels && !comm->timeSlicedGpu.empty())
      BRAID_WARN("BRAID_DEVICE_ENGINE=kernels: %s, so their spinning kernels would take turns: this "
                 "communicator's device calls are staged through pinned host memory instead (start MPS, or "
                 "give each process its own GPU)", comm->timeSlicedGpu.c_str());
    BRAID_INFO(kLogInit, "rank %d: device calls on CUDA device %d (%s)", comm->rank, device,
               comm->settings.deviceKernels && comm->timeSlicedGpu.empty()
                   ? "plan kernels where every rank is on this host, else staged"
                   : "staged through pinned host memory");
  }
  if (comm->deviceProxy->device() != device)
    return fail(ncclInvalidArgument, "rank %d's buffers are on CUDA device %d, but its earlier device "
                "calls used device %d: one communicator, one device", comm->rank, device,
                comm->deviceProxy->device());
  *out = comm->deviceProxy.get();
  return Result::success();
}

void prepareDeviceWork(ncclComm* comm) {
  if (comm->peers.empty() || comm->peers[size_t(comm->rank)].gpuBusId < 0) return;
  // ncclCommInitAll names each rank's device; ncclCommInitRank uses the current one.
  int device = comm->cudaDev;
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  CaptureModeRelaxed relaxed;
  DeviceProxy* proxy = nullptr;
  const Result r = proxyFor(comm, device, &proxy);
  if (!r.ok()) BRAID_INFO(kLogInit, "rank %d: device work not prepared at creation: %s", comm->rank, r.message().c_str());
}

namespace {

// One call's staging.
struct StagedCall {
  StageSpan span;
  StageLayout layout;
  PinnedBlock block;
  size_t scalarOffset = 0;  // of a device-resident PreMulSum scalar in `block`
  engine::Task staged;      // the call with its buffers in `block`
};

// Where one call's bytes go in pinned memory (a block from the pool), and the
// call on them.
Result prepareCall(DeviceProxy* proxy, const engine::Task& t, StagedCall* c) {
  c->span = stageSpanOf(t, t.comm->rank, t.comm->nranks);
  c->layout = stageLayoutOf(t.sendbuff, t.recvbuff, c->span);
  c->staged = t;
  c->staged.sendbuff = nullptr;
  c->staged.recvbuff = nullptr;
  // A device-resident PreMulSum scalar travels at the end of the block.
  c->scalarOffset = (c->layout.blockBytes + 63) & ~size_t(63);
  const size_t blockBytes = t.deviceScalar ? c->scalarOffset + sizeof(t.op.scalar) : c->layout.blockBytes;
  if (blockBytes > 0) BRAID_TRY(proxy->stagingBlock(blockBytes, &c->block));
  if (c->span.outBytes) c->staged.recvbuff = c->block.data + c->layout.outOffset;
  if (t.deviceScalar) c->staged.deviceScalar = c->block.data + c->scalarOffset;
  if (c->span.inBytes) c->staged.sendbuff = c->block.data + c->layout.inOffset;
  return Result::success();
}

// Enqueues the copies of the call's contribution (and scalar) to pinned memory.
Result copyIn(const engine::Task& t, const StagedCall& c) {
  if (t.deviceScalar)
    BRAID_CUDA_TRY(cudaMemcpyAsync(c.block.data + c.scalarOffset, t.deviceScalar, reduce::typeSize(t.type),
                                   cudaMemcpyDeviceToHost, t.stream));
  if (c.span.inBytes)
    BRAID_CUDA_TRY(cudaMemcpyAsync(c.block.data + c.layout.inOffset, t.sendbuff, c.span.inBytes,
                                   cudaMemcpyDeviceToHost, t.stream));
  return Result::success();
}

// Enqueues the copies of the results back into the user's buffer.
Result copyOut(const engine::Task& t, const StagedCall& c) {
  if (c.span.outBytes)
    BRAID_CUDA_TRY(cudaMemcpyAsync(t.recvbuff, c.block.data + c.layout.outOffset, c.span.outBytes,
                                   cudaMemcpyHostToDevice, t.stream));
  return Result::success();
}

// Copies the contributions of one communicator's calls to pinned memory.
Result stageIn(DeviceProxy* proxy, const std::vector<engine::Task>& tasks, const std::vector<size_t>& mine,
               std::vector<StagedCall>* calls, DeviceJob* job) {
  for (size_t i : mine) {
    const engine::Task& t = tasks[i];
    StagedCall& c = (*calls)[i];
    BRAID_TRY(prepareCall(proxy, t, &c));
    BRAID_TRY(copyIn(t, c));
    if (c.span.inBytes || t.deviceScalar) {
      job->ready.emplace_back();
      BRAID_TRY(job->ready.back().record(t.stream));
    }
    job->staged.push_back(c.staged);
    job->sequence = std::max(job->sequence, t.sequence);
  }
  // Under CUDA_LAUNCH_BLOCKING=1 the stream-wait launch waits, inside the
  // CUDA runtime, for its kernel, which waits for the proxy: the proxy must
  // then make no CUDA call (an event query waits behind the launch; seen on an
  // H200). The copies are done (they were blocking too): the job goes ready.
  if (proxy->comm()->settings.launchesBlock) {
    for (CudaEvent& e : job->ready) BRAID_CUDA_TRY(cudaEventSynchronize(e.get()));
    job->ready.clear();
  }
  return Result::success();
}

// Holds each stream until the job is published, then copies the results back.
Result stageOut(DeviceProxy* proxy, uint64_t sequence, const std::vector<engine::Task>& tasks,
                const std::vector<size_t>& mine, std::vector<StagedCall>* calls, InflightJob* inflight) {
  std::set<cudaStream_t> held;
  for (size_t i : mine) {
    const engine::Task& t = tasks[i];
    StagedCall& c = (*calls)[i];
    if (held.insert(t.stream).second)
      BRAID_TRY(kernels::launchStreamWait(proxy->words().devicePublished(), sequence, proxy->words().deviceAbort(),
                                          t.stream));
    BRAID_TRY(copyOut(t, c));
    inflight->done.emplace_back();
    BRAID_TRY(inflight->done.back().record(t.stream));
  }
  return Result::success();
}

// stageIn on a capturing stream (one per communicator: classifyGroup). The
// staging memory belongs to the captured job, which the graph owns from before
// any copy into it is captured; no event is recorded (none recorded in a
// capture could be queried), the job's host function follows the copies.
Result captureIn(DeviceProxy* proxy, const StagedRunner& run, cudaGraph_t graph, const std::vector<engine::Task>& tasks,
                 const std::vector<size_t>& mine, std::vector<StagedCall>* calls, std::shared_ptr<CapturedJob>* out) {
  auto job = std::make_shared<CapturedJob>();
  job->run = run;
  Result r;
  for (size_t i : mine) {
    StagedCall& c = (*calls)[i];
    r = prepareCall(proxy, tasks[i], &c);
    if (!r.ok()) break;
    if (c.block.data) job->blocks.push_back(c.block);
    job->staged.push_back(c.staged);
    job->sequence = std::max(job->sequence, tasks[i].sequence);
  }
  if (!r.ok()) {
    for (const PinnedBlock& b : job->blocks) proxy->pool().release(b);  // nothing was enqueued
    return r;
  }
  BRAID_TRY(proxy->adoptCaptured(job, graph));
  *out = job;
  for (size_t i : mine) BRAID_TRY(copyIn(tasks[i], (*calls)[i]));
  return Result::success();
}

// stageOut on a capturing stream: the stream-wait kernel reads the ticket that
// the launch's host function wrote.
Result captureOut(DeviceProxy* proxy, const CapturedJob& job, const std::vector<engine::Task>& tasks,
                  const std::vector<size_t>& mine, const std::vector<StagedCall>& calls) {
  BRAID_TRY(kernels::launchStreamWaitIndirect(proxy->words().deviceLaunchPublished(), job.ticket.device,
                                              proxy->words().deviceAbort(), tasks[mine.front()].stream));
  for (size_t i : mine) BRAID_TRY(copyOut(tasks[i], calls[i]));
  return Result::success();
}

}  // namespace

namespace {

// One rank: a collective's result is its input (avg divides by one), so its
// device calls are stream-ordered copies, as NCCL makes them, instead of a
// round trip through pinned memory and the proxy (24 GB/s on an H200 for what
// a device copy does at 2 TB/s). Sends and receives (to itself) and
// user-defined reductions (a PreMulSum scales) take the general path.
bool singleRankCopies(const std::vector<engine::Task>& tasks) {
  return std::all_of(tasks.begin(), tasks.end(), [](const engine::Task& t) {
    return t.comm->nranks == 1 && t.coll != schedule::Collective::Send && t.coll != schedule::Collective::Recv &&
           t.userOp < int(ncclNumOps) && t.deviceScalar == nullptr;
  });
}

Result copySingleRankCalls(const std::vector<engine::Task>& tasks) {
  for (size_t i = 0; i < tasks.size(); ++i) {
    const engine::Task& t = tasks[i];
    int device = -1;
    BRAID_TRY(deviceOfCalls(tasks, {i}, &device));  // one device per call, as on the general path
    const StageSpan span = stageSpanOf(t, 0, 1);
    if (span.outBytes == 0 || t.sendbuff == t.recvbuff) continue;
    BRAID_CUDA_TRY(cudaMemcpyAsync(t.recvbuff, t.sendbuff, span.outBytes, cudaMemcpyDefault, t.stream));
  }
  return Result::success();
}

}  // namespace

Result submitDeviceGroup(const std::vector<engine::Task>& tasks, const StagedRunner& run) {
  if (singleRankCopies(tasks)) return copySingleRankCalls(tasks);
  // Plan kernels of ranks whose kernels would only take turns on a GPU
  // (other processes, no MPS) would move a message per time slice: staged.
  // Narrow messages (a wire type) are coded on the host: staged too.
  const bool kernels = std::all_of(tasks.begin(), tasks.end(), [](const engine::Task& t) {
    return t.comm->settings.deviceKernels && t.comm->timeSlicedGpu.empty() && t.wire == reduce::WireType::None;
  });
  if (kernels && lanes::lanesShareMemoryWithEveryPeer(tasks)) return launchDeviceLanes(tasks);
  // Pinned allocations and event queries below are no stream work: they must
  // not fail (nor invalidate) a graph capture of this thread or another.
  CaptureModeRelaxed relaxed;
  std::vector<ncclComm*> comms;  // in order of first call
  std::map<ncclComm*, std::vector<size_t>> byComm;
  for (size_t i = 0; i < tasks.size(); ++i) {
    auto [it, added] = byComm.try_emplace(tasks[i].comm);
    if (added) comms.push_back(tasks[i].comm);
    it->second.push_back(i);
  }
  std::map<ncclComm*, DeviceProxy*> proxies;
  std::map<ncclComm*, StreamCapture> captures;  // a captured communicator's calls share one stream
  for (ncclComm* comm : comms) {
    int device = -1;
    BRAID_TRY(deviceOfCalls(tasks, byComm[comm], &device));
    if (device < 0 && comm->deviceProxy) device = comm->deviceProxy->device();
    if (device < 0) BRAID_CUDA_TRY(cudaGetDevice(&device));  // calls without data
    BRAID_TRY(proxyFor(comm, device, &proxies[comm]));
    BRAID_TRY(captureOf(tasks[byComm[comm].front()].stream, &captures[comm]));
  }

  // Every copy to the host is enqueued before any wait: ranks of one process
  // that share a stream then never wait behind each other's wait kernel.
  std::vector<StagedCall> calls(tasks.size());
  std::map<ncclComm*, DeviceJob> jobs;
  std::map<ncclComm*, std::shared_ptr<CapturedJob>> captured;
  Result r;
  for (ncclComm* comm : comms) {
    DeviceProxy* proxy = proxies[comm];
    DeviceGuard guard(proxy->device());
    r = guard.status();
    if (r.ok()) {
      proxy->reclaim();
      r = captures[comm].active
              ? captureIn(proxy, run, captures[comm].graph, tasks, byComm[comm], &calls, &captured[comm])
              : stageIn(proxy, tasks, byComm[comm], &calls, &jobs[comm]);
    }
    if (!r.ok()) break;
  }
  // A launch submits a captured job after its copies.
  for (ncclComm* comm : comms) {
    if (!r.ok() || !captures[comm].active) continue;
    DeviceGuard guard(proxies[comm]->device());
    r = guard.status();
    if (r.ok()) r = proxies[comm]->enqueueLaunch(captured[comm].get(), tasks[byComm[comm].front()].stream);
  }
  if (!r.ok()) {
    // Nothing was handed to a proxy; copies may still be writing the blocks.
    // Those of captured calls belong to their graphs.
    for (ncclComm* comm : comms)
      if (!captures[comm].active)
        for (size_t i : byComm[comm]) proxies[comm]->pool().abandon(calls[i].block);
    return r;
  }
  std::map<ncclComm*, uint64_t> sequences;
  for (ncclComm* comm : comms) {
    if (captures[comm].active) continue;
    DeviceJob& job = jobs[comm];
    job.run = run;
    sequences[comm] = job.sequence;
    proxies[comm]->submit(std::move(job));
  }
  for (ncclComm* comm : comms) {
    DeviceProxy* proxy = proxies[comm];
    DeviceGuard guard(proxy->device());
    Result s = guard.status();
    if (captures[comm].active) {
      if (s.ok()) s = captureOut(proxy, *captured[comm], tasks, byComm[comm], calls);
      if (r.ok()) r = s;  // the graph owns the staging memory
      continue;
    }
    InflightJob inflight;
    if (s.ok()) s = stageOut(proxy, sequences[comm], tasks, byComm[comm], &calls, &inflight);
    if (s.ok()) {
      for (size_t i : byComm[comm]) inflight.blocks.push_back(calls[i].block);
      proxy->addInflight(std::move(inflight));
      continue;
    }
    // The host work still uses the blocks, and no event says when it is done.
    for (size_t i : byComm[comm]) proxy->pool().abandon(calls[i].block);
    if (r.ok()) r = s;
  }
  return r;
}

void drainDeviceWork(ncclComm* comm) {
  if (comm->deviceProxy) comm->deviceProxy->drain();
}

void pauseDeviceWork(ncclComm* comm) {
  if (comm->deviceProxy) comm->deviceProxy->pause();
}

void resumeDeviceWork(ncclComm* comm) {
  if (comm->deviceProxy) comm->deviceProxy->resume();
}

void abortDeviceWork(ncclComm* comm) {
  if (comm->deviceProxy) comm->deviceProxy->abort();
}

}  // namespace braid::device
