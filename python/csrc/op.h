// One operation as the worker runs it: NCCL calls issued inside a group, then
// local work once the data has arrived.
#pragma once

#include <ATen/ATen.h>
#include <nccl.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device_sync.h"
#include "work.h"

namespace braid_torch {

// What an operation's NCCL calls run with.
struct IssueContext {
  ncclComm_t comm;
  cudaStream_t stream;  // NULL for host tensors
  int rank;
  int size;
  // Throws with braid's own message (ncclGetLastError) when `r` is an error;
  // `call` names the NCCL function.
  void check(ncclResult_t r, const char* call) const;
};

struct OpSpec {
  c10d::OpType type = c10d::OpType::UNKNOWN;
  std::string name;                  // as PyTorch calls it: "allreduce", "alltoall_base", ...
  std::vector<at::Tensor> tensors;   // every tensor the NCCL calls touch (device, stream lifetime)
  std::vector<at::Tensor> results;   // the future's value
  std::function<void(const IssueContext&)> issue;
  std::function<void()> finish;      // may be empty
  std::shared_ptr<std::atomic<int>> source;  // receives: the rank the message came from
};

struct Op {
  OpSpec spec;
  c10::intrusive_ptr<BraidWork> work;
  std::shared_ptr<DeviceSync> device;
};

// Operations that run in one NCCL group: one, or all issued while coalescing.
struct Batch {
  std::vector<Op> ops;
  c10::intrusive_ptr<BraidWork> coalesced;  // endCoalescing's work, if any
};

}  // namespace braid_torch
