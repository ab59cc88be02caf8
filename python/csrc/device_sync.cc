#include "device_sync.h"

#include <map>

#ifdef BRAID_TORCH_WITH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "braid_api.h"

namespace braid_torch {

namespace {

// The device shared by all tensors of one call, or CPU; mixed calls are refused.
c10::Device commonDevice(const std::vector<at::Tensor>& tensors, const char* what) {
  c10::Device dev(c10::kCPU);
  bool first = true;
  for (const at::Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (first) {
      dev = t.device();
      first = false;
      continue;
    }
    TORCH_CHECK(t.device() == dev, "braid: ", what, " got tensors on ", dev, " and ", t.device(),
                "; all tensors of one call must be on the same device");
  }
  TORCH_CHECK(dev.is_cpu() || dev.is_cuda(), "braid: ", what, " supports CPU and CUDA tensors, not ",
              dev);
  return dev;
}

}  // namespace

#ifdef BRAID_TORCH_WITH_CUDA

bool builtWithCuda() { return true; }

struct CommStreams::Impl {
  std::mutex mutex;
  std::map<c10::DeviceIndex, c10::cuda::CUDAStream> streams;

  c10::cuda::CUDAStream get(c10::DeviceIndex index) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = streams.find(index);
    if (it == streams.end())
      it = streams.emplace(index, c10::cuda::getStreamFromPool(false, index)).first;
    return it->second;
  }
};

struct DeviceSync::Impl {
  c10::Device device;
  c10::cuda::CUDAStream stream;
  at::cuda::CUDAEvent start;
  at::cuda::CUDAEvent done{cudaEventDisableTiming};
};

std::shared_ptr<DeviceSync> DeviceSync::capture(const std::vector<at::Tensor>& tensors, CommStreams& streams,
                                                const char* what) {
  const c10::Device dev = commonDevice(tensors, what);
  if (dev.is_cpu()) return nullptr;
  TORCH_CHECK(deviceBuffersSupported(), "braid: ", what, " got a CUDA tensor, but the loaded libbraid (",
              braid().versionString(), ") runs collectives on host memory only. Use CPU tensors, or a "
              "gloo/nccl group for CUDA tensors (BRAID_TORCH_ALLOW_CUDA=1 overrides this check)");
  c10::cuda::CUDAGuard guard(dev);
  auto impl = std::unique_ptr<Impl>(new Impl{dev, streams.impl().get(dev.index()), {}, {}});
  impl->start.record(c10::cuda::getCurrentCUDAStream(dev.index()));
  return std::shared_ptr<DeviceSync>(new DeviceSync(std::move(impl)));
}

cudaStream_t DeviceSync::begin() {
  c10::cuda::CUDAGuard guard(impl_->device);
  impl_->start.block(impl_->stream);
  return impl_->stream.stream();
}

void DeviceSync::end(const std::vector<at::Tensor>& used) {
  c10::cuda::CUDAGuard guard(impl_->device);
  for (const at::Tensor& t : used)
    if (t.defined() && t.is_cuda())
      c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), impl_->stream);
  impl_->done.record(impl_->stream);
}

void DeviceSync::withStream(const std::function<void()>& fn) const {
  c10::cuda::CUDAStreamGuard guard(impl_->stream);
  fn();
}

void DeviceSync::blockCurrentStream() const {
  impl_->done.block(c10::cuda::getCurrentCUDAStream(impl_->device.index()));
}

bool DeviceSync::query() const { return impl_->done.query(); }

void DeviceSync::synchronize() const { impl_->done.synchronize(); }

#else  // host-only build

bool builtWithCuda() { return false; }

struct CommStreams::Impl {};

struct DeviceSync::Impl {
  c10::Device device{c10::kCPU};
};

std::shared_ptr<DeviceSync> DeviceSync::capture(const std::vector<at::Tensor>& tensors, CommStreams&,
                                                const char* what) {
  const c10::Device dev = commonDevice(tensors, what);
  TORCH_CHECK(dev.is_cpu(), "braid: ", what, " got a CUDA tensor, but braid_torch was built without "
              "CUDA support; reinstall it with BRAID_TORCH_CUDA=1 on a machine with the CUDA toolkit");
  return nullptr;
}

cudaStream_t DeviceSync::begin() { return nullptr; }
void DeviceSync::end(const std::vector<at::Tensor>&) {}
void DeviceSync::withStream(const std::function<void()>& fn) const { fn(); }
void DeviceSync::blockCurrentStream() const {}
bool DeviceSync::query() const { return true; }
void DeviceSync::synchronize() const {}

#endif

CommStreams::CommStreams() : impl_(std::make_unique<Impl>()) {}
CommStreams::~CommStreams() = default;

DeviceSync::DeviceSync(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DeviceSync::~DeviceSync() = default;

c10::Device DeviceSync::device() const { return impl_->device; }

}  // namespace braid_torch
