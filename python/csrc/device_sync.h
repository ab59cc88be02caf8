// Stream ordering for CUDA tensors, as PyTorch's NCCL backend does it: the
// communication stream waits for an event recorded on the caller's current
// stream, the work runs on the communication stream, and waiting on the Work
// makes the caller's current stream wait for an event recorded after it (the
// CPU does not block). Built only with BRAID_TORCH_WITH_CUDA; without it CUDA
// tensors are refused with a message saying how to rebuild.
#pragma once

#include <ATen/ATen.h>
#include <nccl.h>

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace braid_torch {

// One communication stream per device, fixed for a communicator's life so that
// its operations reach the device in the order they were issued.
class CommStreams {
 public:
  CommStreams();
  ~CommStreams();
  struct Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

class DeviceSync {
 public:
  // Null when every tensor is on the CPU. For CUDA tensors (all on one device),
  // records the start event on the caller's current stream; `what` names the
  // operation in errors.
  static std::shared_ptr<DeviceSync> capture(const std::vector<at::Tensor>& tensors, CommStreams& streams,
                                             const char* what);
  ~DeviceSync();

  // Worker thread, before the NCCL calls: the communication stream waits for the
  // start event. Returns that stream.
  cudaStream_t begin();
  // Worker thread, after the NCCL calls: ties `used` to the stream for the caching
  // allocator and records the end event.
  void end(const std::vector<at::Tensor>& used);
  // Runs fn with the communication stream current (ATen work after the NCCL
  // calls, marking futures so that they carry the stream's events).
  void withStream(const std::function<void()>& fn) const;

  void blockCurrentStream() const;
  bool query() const;
  void synchronize() const;
  c10::Device device() const;

  struct Impl;

 private:
  explicit DeviceSync(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// True when this build carries the CUDA path.
bool builtWithCuda();

}  // namespace braid_torch
