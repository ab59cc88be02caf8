// The Work handed back for every operation: completed by the backend's worker
// thread, with a future for DDP communication hooks and Python's get_future().
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "device_sync.h"

namespace braid_torch {

class BraidWork : public c10d::Work {
 public:
  // `results` become the future's value (a list of tensors); `device` is set for
  // CUDA tensors, whose completion is an event on the communication stream.
  BraidWork(int rank, c10d::OpType type, std::string description, std::vector<at::Tensor> results,
            std::shared_ptr<DeviceSync> device);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  // Blocks until the operation finished (host tensors) or was enqueued and the
  // caller's current stream waits for it (CUDA tensors). A non-zero timeout
  // bounds only this wait; the communicator's own timeout bounds the operation.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Called once by the worker thread: `error` null on success.
  void complete(std::exception_ptr error);

  const std::string& description() const { return description_; }

  // recv and recv from any source: the rank the message came from, once the
  // receive has run (PyTorch's work._source_rank()).
  void setSource(std::shared_ptr<std::atomic<int>> source) { source_ = std::move(source); }
  int sourceRank() const override;

 private:
  std::string description_;
  std::vector<at::Tensor> results_;
  std::shared_ptr<DeviceSync> device_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<std::atomic<int>> source_;
};

}  // namespace braid_torch
