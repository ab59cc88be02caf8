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

#include "base/cuda_quiet_free.h"
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
  freeDeferredIfQuiet();  // its own memory, and what others kept, once no kernel waits
}

Result deviceOfCalls(const std::vector<engine::Task>& tasks, const std::vector<size_t>& mine, int* device) {
  *device = -1;
  for (size_t i : mine) {
    const engine::Task& t = tasks[i];  // t.device: classifyGroup's
    if (t.device < 0) continue;
    if (*device < 0) *device = t.device;
    if (t.device != *device)
      return fail(ncclInvalidArgument, "%s: rank %d's buffers %p and %p are on device %d, but its other "
                  "buffers in this group are on device %d", collectiveName(t.coll), t.comm->rank, t.sendbuff,
                  t.recvbuff, t.device, *device);
  }
  return Result::success();
}

Result proxyFor(ncclComm* comm, int device, DeviceProxy** out) {
  if (!comm->deviceProxy) {
    std::unique_ptr<DeviceProxy, DeviceProxyDeleter> proxy(new DeviceProxy(comm, device));
    BRAID_TRY(proxy->start());
    comm->deviceProxy = std::move(proxy);
    // Never slow in silence: staged, these ranks move a few GB/s where MPS's
    // plan kernels move tens (docs/performance.md).
    if (comm->settings.deviceKernels && !comm->timeSlicedGpu.empty())
      BRAID_WARN("rank %d: %s, so their plan kernels would only take turns: this communicator's device calls "
                 "are staged through pinned host memory instead, several times slower (start MPS with "
                 "nvidia-cuda-mps-control -d, or give each process its own GPU)", comm->rank,
                 comm->timeSlicedGpu.c_str());
    BRAID_INFO(kLogInit, "rank %d: device calls on CUDA device %d (%s)", comm->rank, device,
               comm->settings.deviceKernels && comm->timeSlicedGpu.empty()
                   ? (comm->settings.bridgedKernels ? "plan kernels, FIFOs with other hosts bridged"
                                                    : "plan kernels where every rank is on this host, else staged")
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

// Blocks a call in pieces cycles through: while the host works on one piece,
// the next one's contribution is copied in.
constexpr size_t kPieceDepth = 2;
// What one piece's rows may take of a block (the rest: alignment, a scalar).
constexpr size_t kPieceBudget = kStagingBlockMax - 512;

// One call's staging: its pieces (column ranges of its rows, stagePieceColumns)
// pass through its blocks in turn. Stream order on the call's stream keeps a
// block's next copy in behind its previous copy out, and the host work on a
// piece that reuses a block starts once its stream has passed that point: a
// block is reused with no wait on the host.
struct StagedCall {
  StageRows rows;
  size_t columns = 0;  // per piece
  size_t pieces = 1;
  std::vector<PinnedBlock> blocks;
  std::vector<bool> returned;  // per block: handed to an InflightJob, which returns it to the pool
};

size_t elementBytes(const engine::Task& t) { return reduce::typeSize(t.type); }

// Where piece `p`'s rows and scalar lie in its block.
struct PieceGeometry {
  size_t first = 0;  // column
  size_t columns = 0;
  StageLayout layout;
  size_t scalarOffset = 0;  // of a device-resident PreMulSum scalar
  size_t blockBytes = 0;
};

PieceGeometry pieceOf(const engine::Task& t, const StagedCall& c, size_t p) {
  PieceGeometry g;
  g.first = p * c.columns;
  g.columns = std::min(c.columns, t.count - std::min(t.count, g.first));
  g.layout = stageLayoutOf(c.rows, g.columns * elementBytes(t));
  g.scalarOffset = (g.layout.blockBytes + 63) & ~size_t(63);
  g.blockBytes = t.deviceScalar ? g.scalarOffset + sizeof(t.op.scalar) : g.layout.blockBytes;
  return g;
}

// The call's pieces and blocks: `columns` per piece (all of them: one piece).
Result prepareCall(DeviceProxy* proxy, const engine::Task& t, size_t columns, StagedCall* c) {
  c->rows = stageRowsOf(t, t.comm->rank, t.comm->nranks);
  c->columns = std::max<size_t>(columns, 1);
  c->pieces = t.count == 0 ? 1 : (t.count + c->columns - 1) / c->columns;
  const size_t bytes = pieceOf(t, *c, 0).blockBytes;  // the first piece is the largest
  if (bytes == 0) return Result::success();
  for (size_t i = 0; i < std::min(c->pieces, kPieceDepth); ++i) {
    PinnedBlock b;
    BRAID_TRY(proxy->stagingBlock(bytes, &b));
    c->blocks.push_back(b);
    c->returned.push_back(false);
  }
  return Result::success();
}

Result prepareStagedCall(DeviceProxy* proxy, const engine::Task& t, StagedCall* c) {
  return prepareCall(proxy, t, stagePieceColumns(t, t.comm->nranks, kPieceBudget), c);
}

const PinnedBlock* blockOf(const StagedCall& c, size_t p) {
  return c.blocks.empty() ? nullptr : &c.blocks[p % c.blocks.size()];
}

// Piece `p` of the call as a call on its block.
engine::Task pieceTask(const engine::Task& t, const StagedCall& c, size_t p) {
  const PieceGeometry g = pieceOf(t, c, p);
  const PinnedBlock* block = blockOf(c, p);
  engine::Task piece = t;
  piece.count = g.columns;
  piece.sendbuff = c.rows.in && block ? block->data + g.layout.inOffset : nullptr;
  piece.recvbuff = c.rows.out && block ? block->data + g.layout.outOffset : nullptr;
  if (t.deviceScalar) piece.deviceScalar = block->data + g.scalarOffset;
  return piece;
}

// `rows` rows of `width` bytes, `spitch` and `dpitch` apart.
Result copyRows(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t rows,
                cudaMemcpyKind kind, cudaStream_t stream) {
  if (width == 0 || rows == 0) return Result::success();
  if (rows == 1 || (dpitch == width && spitch == width))
    BRAID_CUDA_TRY(cudaMemcpyAsync(dst, src, width * rows, kind, stream));
  else if (std::max(dpitch, spitch) <= size_t(INT32_MAX))
    BRAID_CUDA_TRY(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, kind, stream));
  else  // beyond the pitches a 2D copy takes
    for (size_t r = 0; r < rows; ++r)
      BRAID_CUDA_TRY(cudaMemcpyAsync(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch,
                                     width, kind, stream));
  return Result::success();
}

// Enqueues the copies of piece `p`'s contribution (and scalar) to pinned memory.
Result copyIn(const engine::Task& t, const StagedCall& c, size_t p) {
  const PieceGeometry g = pieceOf(t, c, p);
  const PinnedBlock* block = blockOf(c, p);
  if (block == nullptr) return Result::success();
  if (t.deviceScalar)
    BRAID_CUDA_TRY(cudaMemcpyAsync(block->data + g.scalarOffset, t.deviceScalar, elementBytes(t),
                                   cudaMemcpyDeviceToHost, t.stream));
  const size_t es = elementBytes(t);
  return copyRows(block->data + g.layout.inOffset, g.columns * es, static_cast<const char*>(t.sendbuff) + g.first * es,
                  t.count * es, g.columns * es, c.rows.in, cudaMemcpyDeviceToHost, t.stream);
}

// Enqueues the copies of piece `p`'s results back into the user's buffer.
Result copyOut(const engine::Task& t, const StagedCall& c, size_t p) {
  const PieceGeometry g = pieceOf(t, c, p);
  const PinnedBlock* block = blockOf(c, p);
  if (block == nullptr) return Result::success();
  const size_t es = elementBytes(t);
  return copyRows(static_cast<char*>(t.recvbuff) + g.first * es, t.count * es, block->data + g.layout.outOffset,
                  g.columns * es, g.columns * es, c.rows.out, cudaMemcpyHostToDevice, t.stream);
}

// One communicator's calls of the group, staged in rounds: round j runs piece
// j of every call that has one, as one job of its proxy.
struct CommStaging {
  DeviceProxy* proxy = nullptr;
  std::vector<size_t> mine;       // its tasks in the group
  std::vector<StagedCall> calls;  // parallel to mine
  size_t rounds = 0;
  std::vector<uint64_t> waitValues;  // of the rounds handed to the proxy
};

Result prepareComm(const std::vector<engine::Task>& tasks, CommStaging* s) {
  s->calls.resize(s->mine.size());
  for (size_t k = 0; k < s->mine.size(); ++k) {
    BRAID_TRY(prepareStagedCall(s->proxy, tasks[s->mine[k]], &s->calls[k]));
    s->rounds = std::max(s->rounds, s->calls[k].pieces);
  }
  return Result::success();
}

// Copies round j's contributions to pinned memory, as a job for the proxy.
Result stageIn(const std::vector<engine::Task>& tasks, CommStaging& s, size_t j, DeviceJob* job) {
  for (size_t k = 0; k < s.mine.size(); ++k) {
    const engine::Task& t = tasks[s.mine[k]];
    const StagedCall& c = s.calls[k];
    if (j >= c.pieces) continue;
    BRAID_TRY(copyIn(t, c, j));
    // A reused block: the host work must also wait for the previous piece's
    // copy out of it, even where nothing is copied in.
    if (!c.blocks.empty() && (c.rows.in || t.deviceScalar || j >= c.blocks.size())) {
      job->ready.emplace_back();
      BRAID_TRY(job->ready.back().record(t.stream));
    }
    job->staged.push_back(pieceTask(t, c, j));
    job->sequence = std::max(job->sequence, t.sequence);
  }
  // Under CUDA_LAUNCH_BLOCKING=1 the stream-wait launch waits, inside the
  // CUDA runtime, for its kernel, which waits for the proxy: the proxy must
  // then make no CUDA call (an event query waits behind the launch; seen on an
  // H200). The copies are done (they were blocking too): the job goes ready.
  if (s.proxy->comm()->settings.launchesBlock) {
    for (CudaEvent& e : job->ready) BRAID_CUDA_TRY(cudaEventSynchronize(e.get()));
    job->ready.clear();
  }
  return Result::success();
}

Result submitRound(const std::vector<engine::Task>& tasks, CommStaging& s, size_t j, const StagedRunner& run) {
  DeviceJob job;
  BRAID_TRY(stageIn(tasks, s, j, &job));
  job.run = run;
  s.waitValues.push_back(s.proxy->submit(std::move(job)));
  return Result::success();
}

// Whether piece j is the last to use its block.
bool lastUseOfBlock(const StagedCall& c, size_t j) {
  return j < c.pieces && !c.blocks.empty() && j + c.blocks.size() >= c.pieces;
}

// Holds each stream of round j until its job is published, then copies the
// results back; the blocks whose last piece this is return to the pool after.
Result stageOut(const std::vector<engine::Task>& tasks, CommStaging& s, size_t j, InflightJob* inflight) {
  std::set<cudaStream_t> held;
  for (size_t k = 0; k < s.mine.size(); ++k) {
    const engine::Task& t = tasks[s.mine[k]];
    StagedCall& c = s.calls[k];
    if (j >= c.pieces) continue;
    if (held.insert(t.stream).second)
      BRAID_TRY(kernels::launchStreamWait(s.proxy->words().devicePublished(), s.waitValues[j],
                                          s.proxy->words().deviceAbort(), t.stream));
    BRAID_TRY(copyOut(t, c, j));
    SharedEvent done;
    BRAID_TRY(s.proxy->events().record(t.stream, &done));
    inflight->done.push_back(std::move(done));
    if (lastUseOfBlock(c, j)) inflight->blocks.push_back(*blockOf(c, j));
  }
  return Result::success();
}

// The blocks of calls whose copies may still run or whose host work may still
// use them: never reused.
void abandonBlocks(CommStaging& s) {
  for (StagedCall& c : s.calls)
    for (size_t b = 0; b < c.blocks.size(); ++b)
      if (!c.returned[b]) s.proxy->pool().abandon(c.blocks[b]);
}

// Enqueues the staged communicators' rounds. The first kPieceDepth rounds of
// every communicator are copied in before any stream waits, so ranks of one
// process that share a stream never wait behind each other's wait kernel; a
// later round's copies in follow the stream waits of the round that used its
// blocks before.
Result runRounds(const std::vector<engine::Task>& tasks, std::vector<CommStaging*>& comms, const StagedRunner& run) {
  const auto quiet = holdQuietFrees();  // its stream-wait kernels are counted before any free may run
  Result r;
  for (size_t j = 0; j < kPieceDepth && r.ok(); ++j)
    for (CommStaging* s : comms) {
      if (j >= s->rounds) continue;
      DeviceGuard guard(s->proxy->device());
      r = guard.status();
      if (r.ok()) r = submitRound(tasks, *s, j, run);
      if (!r.ok()) break;
    }
  size_t rounds = 0;
  for (CommStaging* s : comms) rounds = std::max(rounds, s->rounds);
  for (size_t j = 0; j < rounds && r.ok(); ++j)
    for (CommStaging* s : comms) {
      if (j >= s->rounds) continue;
      DeviceGuard guard(s->proxy->device());
      r = guard.status();
      InflightJob inflight;
      if (r.ok()) r = stageOut(tasks, *s, j, &inflight);
      if (r.ok()) {  // else its events are not all recorded: its blocks are abandoned below
        for (StagedCall& c : s->calls)
          if (lastUseOfBlock(c, j)) c.returned[j % c.blocks.size()] = true;
        s->proxy->addInflight(std::move(inflight));
      }
      if (r.ok() && j + kPieceDepth < s->rounds) r = submitRound(tasks, *s, j + kPieceDepth, run);
      if (!r.ok()) break;
    }
  if (!r.ok())
    for (CommStaging* s : comms) abandonBlocks(*s);
  return r;
}

// A call captured in a CUDA graph stages whole, in blocks the graph owns from
// before any copy into them is captured (they are made at capture, once): one
// piece. No event is recorded (none recorded in a capture could be queried);
// the job's host function follows the copies.
Result captureIn(DeviceProxy* proxy, const StagedRunner& run, cudaGraph_t graph, const std::vector<engine::Task>& tasks,
                 const std::vector<size_t>& mine, std::vector<StagedCall>* calls, std::shared_ptr<CapturedJob>* out) {
  auto job = std::make_shared<CapturedJob>();
  job->run = run;
  calls->resize(mine.size());
  Result r;
  for (size_t k = 0; k < mine.size() && r.ok(); ++k) {
    const engine::Task& t = tasks[mine[k]];
    StagedCall& c = (*calls)[k];
    r = prepareCall(proxy, t, t.count, &c);
    job->blocks.insert(job->blocks.end(), c.blocks.begin(), c.blocks.end());
    job->staged.push_back(pieceTask(t, c, 0));
    job->sequence = std::max(job->sequence, t.sequence);
  }
  if (!r.ok()) {
    for (const PinnedBlock& b : job->blocks) proxy->pool().release(b);  // nothing was enqueued
    return r;
  }
  BRAID_TRY(proxy->adoptCaptured(job, graph));
  *out = job;
  for (size_t k = 0; k < mine.size(); ++k) BRAID_TRY(copyIn(tasks[mine[k]], (*calls)[k], 0));
  return Result::success();
}

// The stream-wait kernel of a captured job reads the ticket that the launch's
// host function wrote.
Result captureOut(DeviceProxy* proxy, const CapturedJob& job, const std::vector<engine::Task>& tasks,
                  const std::vector<size_t>& mine, const std::vector<StagedCall>& calls) {
  BRAID_TRY(kernels::launchStreamWaitIndirect(proxy->words().deviceLaunchPublished(), job.ticket.device,
                                              proxy->words().deviceAbort(), tasks[mine.front()].stream));
  for (size_t k = 0; k < mine.size(); ++k) BRAID_TRY(copyOut(tasks[mine[k]], calls[k], 0));
  return Result::success();
}
}  // namespace

namespace {

// One rank: a collective's result is its input (avg divides by one), so its
// device calls are stream-ordered copies, as NCCL makes them, instead of a
// round trip through pinned memory and the proxy (24 GB/s on an H200 for what
// a device copy does at 2 TB/s). Sends to itself are matched with its
// receives in order, as between ranks, and each pair is a copy too
// (nccl-tests' alltoall and sendrecv on one GPU): where every call is on one
// stream and each pair's sizes agree; else, and for user-defined reductions
// (a PreMulSum scales), the general path.
bool isSendOrRecv(const engine::Task& t) {
  return t.coll == schedule::Collective::Send || t.coll == schedule::Collective::Recv;
}

// The group's sends and receives, paired in issue order; false where they
// do not pair up.
bool selfPairs(const std::vector<engine::Task>& tasks, std::vector<std::pair<size_t, size_t>>* pairs) {
  std::vector<size_t> sends, recvs;
  for (size_t i = 0; i < tasks.size(); ++i) {
    if (tasks[i].coll == schedule::Collective::Send) sends.push_back(i);
    if (tasks[i].coll == schedule::Collective::Recv) recvs.push_back(i);
  }
  if (sends.size() != recvs.size()) return false;
  for (size_t k = 0; k < sends.size(); ++k) {
    const engine::Task& s = tasks[sends[k]];
    const engine::Task& r = tasks[recvs[k]];
    if (s.count * elementBytes(s) != r.count * elementBytes(r)) return false;
    pairs->emplace_back(sends[k], recvs[k]);
  }
  return true;
}

bool singleRankCopies(const std::vector<engine::Task>& tasks) {
  const bool oneRank = std::all_of(tasks.begin(), tasks.end(), [](const engine::Task& t) {
    return t.comm->nranks == 1 && t.userOp < int(ncclNumOps) && t.deviceScalar == nullptr;
  });
  if (!oneRank) return false;
  if (std::none_of(tasks.begin(), tasks.end(), isSendOrRecv)) return true;
  std::vector<std::pair<size_t, size_t>> unused;
  const bool oneStream = std::all_of(tasks.begin(), tasks.end(),
                                     [&](const engine::Task& t) { return t.stream == tasks.front().stream; });
  return oneStream && selfPairs(tasks, &unused);
}

Result copySingleRankCalls(const std::vector<engine::Task>& tasks) {
  for (size_t i = 0; i < tasks.size(); ++i) {
    const engine::Task& t = tasks[i];
    int device = -1;
    BRAID_TRY(deviceOfCalls(tasks, {i}, &device));  // one device per call, as on the general path
    if (isSendOrRecv(t)) continue;
    const StageSpan span = stageSpanOf(t, 0, 1);
    if (span.outBytes == 0 || t.sendbuff == t.recvbuff) continue;
    BRAID_CUDA_TRY(cudaMemcpyAsync(t.recvbuff, t.sendbuff, span.outBytes, cudaMemcpyDefault, t.stream));
  }
  std::vector<std::pair<size_t, size_t>> pairs;
  selfPairs(tasks, &pairs);
  for (const auto& [send, recv] : pairs) {
    const engine::Task& s = tasks[send];
    const size_t bytes = s.count * elementBytes(s);
    if (bytes == 0 || s.sendbuff == tasks[recv].recvbuff) continue;
    BRAID_CUDA_TRY(cudaMemcpyAsync(tasks[recv].recvbuff, s.sendbuff, bytes, cudaMemcpyDefault, s.stream));
  }
  return Result::success();
}

// Whether a CUDA graph captures any of the calls' streams, and whether one
// capture takes all of them (a group's calls mostly share streams: each run
// of one stream is asked once).
struct GroupCapture {
  bool any = false;
  bool whole = true;  // every stream in the same capture (or none captures)
};

Result groupCaptureOf(const std::vector<engine::Task>& tasks, GroupCapture* out) {
  *out = GroupCapture();
  unsigned long long first = 0;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const engine::Task& t = tasks[i];
    if (i > 0 && t.stream == tasks[i - 1].stream) continue;
    StreamCapture capture;
    BRAID_TRY(captureOf(t, &capture));
    if (i == 0) first = capture.active ? capture.id : 0;
    out->any = out->any || capture.active;
    out->whole = out->whole && (capture.active ? capture.id : 0) == first;
  }
  return Result::success();
}

}  // namespace

Result submitDeviceGroup(const std::vector<engine::Task>& tasks, const StagedRunner& run) {
  if (singleRankCopies(tasks)) return copySingleRankCalls(tasks);
  // Plan kernels of ranks whose kernels would only take turns on a GPU
  // (other processes, no MPS) would move a message per time slice: staged.
  // A fixed-point step (reproducible mode) runs on the host only.
  bool kernels = std::all_of(tasks.begin(), tasks.end(), [](const engine::Task& t) {
    return t.comm->settings.deviceKernels && t.comm->timeSlicedGpu.empty() && t.wire != reduce::WireType::Fixed64;
  });
  // Ranks on other hosts: plan kernels under BRAID_MULTIHOST_ENGINE=kernels.
  const bool oneHost = lanes::lanesShareMemoryWithEveryPeer(tasks);
  kernels = kernels && (oneHost || std::all_of(tasks.begin(), tasks.end(), [](const engine::Task& t) {
              return t.comm->settings.bridgedKernels;
            }));
  // A captured group runs as plan kernels under BRAID_GRAPH_ENGINE=kernels
  // when one capture takes all of it (its launches join its streams), and,
  // where ranks are on other hosts, it is one communicator's (each launch's
  // watch starts the pump of the FIFOs bridged to them: a graph's launches
  // happen without braid); else it is staged, which graphs replay.
  GroupCapture capture;
  if (kernels) BRAID_TRY(groupCaptureOf(tasks, &capture));
  const bool graphKernels = std::all_of(tasks.begin(), tasks.end(),
                                        [](const engine::Task& t) { return t.comm->settings.graphKernels; });
  const bool oneComm = std::all_of(tasks.begin(), tasks.end(),
                                   [&](const engine::Task& t) { return t.comm == tasks.front().comm; });
  const bool capturedKernels = graphKernels && capture.whole && (oneHost || oneComm);
  if (capture.any && !capturedKernels)
    BRAID_INFO(kLogColl, "rank %d: a CUDA graph captures this group's device calls: staged through pinned host "
               "memory (%s)", tasks.front().comm->rank,
               !graphKernels     ? "BRAID_GRAPH_ENGINE=staged"
               : !capture.whole ? "its streams are not all in one capture"
                                : "it drives several communicators whose ranks span hosts");
  if (kernels && (!capture.any || capturedKernels)) return launchDeviceLanes(tasks);
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
    BRAID_TRY(captureOf(tasks[byComm[comm].front()], &captures[comm]));
  }

  // Captured communicators: every copy to the host is captured before any
  // wait (ranks of one process may share the capturing stream), then each
  // launch submits its job after its copies. Their streams capture, so they
  // are not the staged communicators' streams.
  std::map<ncclComm*, std::vector<StagedCall>> capturedCalls;
  std::map<ncclComm*, std::shared_ptr<CapturedJob>> captured;
  for (ncclComm* comm : comms) {
    if (!captures[comm].active) continue;
    DeviceGuard guard(proxies[comm]->device());
    BRAID_TRY(guard.status());
    proxies[comm]->reclaim();
    BRAID_TRY(captureIn(proxies[comm], run, captures[comm].graph, tasks, byComm[comm], &capturedCalls[comm],
                        &captured[comm]));
  }
  for (auto& [comm, job] : captured) {
    DeviceGuard guard(proxies[comm]->device());
    BRAID_TRY(guard.status());
    BRAID_TRY(proxies[comm]->enqueueLaunch(job.get(), tasks[byComm[comm].front()].stream));
  }

  std::vector<CommStaging> staging;
  for (ncclComm* comm : comms)
    if (!captures[comm].active) staging.push_back(CommStaging{proxies[comm], byComm[comm], {}, 0, {}});
  std::vector<CommStaging*> stagedComms;
  Result r;
  for (CommStaging& s : staging) {
    DeviceGuard guard(s.proxy->device());
    r = guard.status();
    if (r.ok()) s.proxy->reclaim();
    if (r.ok()) r = prepareComm(tasks, &s);
    stagedComms.push_back(&s);
    if (!r.ok()) break;
  }
  if (!r.ok()) {
    for (CommStaging* s : stagedComms)  // nothing was enqueued
      for (const StagedCall& c : s->calls)
        for (const PinnedBlock& b : c.blocks) s->proxy->pool().release(b);
    return r;
  }
  r = runRounds(tasks, stagedComms, run);

  for (auto& [comm, job] : captured) {
    DeviceGuard guard(proxies[comm]->device());
    Result s = guard.status();
    if (s.ok()) s = captureOut(proxies[comm], *job, tasks, byComm[comm], capturedCalls[comm]);
    if (r.ok()) r = s;  // the graph owns the staging memory
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
