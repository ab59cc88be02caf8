// braid as a c10d::Backend: one braid communicator per process group, driven
// from a worker thread that runs the group's operations in issue order.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "any_source.h"
#include "device_sync.h"
#include "op.h"
#include "work.h"
#include "worker.h"

namespace braid_torch {

// What the worker's tasks need; shared with them so that a task still queued
// when the backend goes away never sees freed memory. Destroys the communicator
// when the last owner lets go.
struct CommContext {
  ncclComm_t comm = nullptr;
  int rank = 0;
  int size = 0;
  std::chrono::milliseconds timeout{0};
  std::mutex mutex;             // guards the two fields below
  std::string failure;          // first error; later operations fail fast with it
  bool aborted = false;
  std::mutex execMutex;         // held while a batch runs: one at a time, in order
  std::atomic<int64_t> inFlight{0};  // batches submitted and not yet run
  ~CommContext();
};

class BraidBackend final : public c10d::Backend {
 public:
  // Collective over the group: rank 0 creates the unique id and publishes it in
  // `store` (already prefixed per group by PyTorch); every rank then joins.
  BraidBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
               std::chrono::milliseconds timeout);
  ~BraidBackend() override;

  const std::string getBackendName() const override { return "braid"; }
  bool supportsCoalescing() const override { return true; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  c10d::ErrorType getError() override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  // Takes the next message of a peer that has sent this rank one not yet
  // received (any_source.h); waits for one up to the group's timeout.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // Operations issued between these two run as one ncclGroupStart/End, so
  // matching sends and receives of batch_isend_irecv cannot deadlock.
  // Every rank numbers the operations it issues from 0, as NCCL's process
  // group does: the numbers agree without a message while the ranks issue the
  // same operations.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override;

  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // Reproducible reductions on this group's communicator (braidCommSetReproducible),
  // in order with the operations issued before and after; every rank of the group
  // must set the same mode.
  void setReproducible(bool on);

  // Float32 sums of this group travel as `wire` (braidCommSetWireType;
  // ncclFloat32: off), in order with the operations issued before and after;
  // every rank of the group must set the same type.
  void setWireType(ncclDataType_t wire);

  // Runs what is queued, then releases the communicator.
  void shutdown() override;
  // Fails what is queued and not started; an operation already running ends
  // when it completes or hits the communicator's timeout.
  void abort() override;

  // Queues one operation (or adds it to the open coalescing batch). A
  // synchronous call (asyncOp false) on host tensors with nothing queued runs
  // on the calling thread instead: the caller is about to wait for it anyway,
  // and handing it to the worker costs a thread wake-up each way.
  c10::intrusive_ptr<c10d::Work> submit(OpSpec spec, bool asyncOp = true);

 private:
  // A setting of the communicator (`issue` calls braid on it), in order with
  // the operations issued before and after; returns when it has run.
  void configure(const char* name, std::function<void(const IssueContext&)> issue);
  // recv and recvAnysource: a receive into `t` from the rank sourceOf() names
  // when the operation's turn comes on the worker (counted for any_source.h).
  c10::intrusive_ptr<c10d::Work> receive(const at::Tensor& t, c10d::OpType type, const char* name,
                                         std::function<int()> sourceOf);
  // allreduce of a sparse (COO) CPU tensor: Gloo's gather-and-coalesce sum.
  c10::intrusive_ptr<c10d::Work> allreduceSparse(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts);
  void post(const std::shared_ptr<Batch>& batch);
  // Runs `batch` after every batch submitted before it, then completes its works.
  static void runInOrder(CommContext& ctx, Batch& batch);
  // The NCCL calls and local work of one batch; the error, if any.
  static std::exception_ptr runBatch(CommContext& ctx, Batch& batch);
  std::string describe(const std::string& name, uint64_t seq) const;

  std::shared_ptr<CommContext> ctx_;
  std::shared_ptr<AnySourceLedger> anySource_;  // send and receive counts per peer
  CommStreams streams_;
  std::mutex submitMutex_;  // coalescing state and sequence numbers
  bool coalescing_ = false;
  std::shared_ptr<Batch> open_;
  uint64_t seq_ = 0;
  Worker worker_;  // last member: its thread stops before the others go
};

// The factory PyTorch calls through Backend.register_backend.
c10::intrusive_ptr<c10d::Backend> createBraidBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                      int size, std::chrono::milliseconds timeout);

}  // namespace braid_torch
