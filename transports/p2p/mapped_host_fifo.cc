#include "transports/p2p/mapped_host_fifo.h"

#include <cuda_runtime_api.h>

#include <string>

#include "base/cuda_quiet_free.h"
#include "base/cuda_util.h"

namespace braid::p2p {
namespace {

// One cudaHostAlloc (a FIFO's own, or the reserve), mapped at the same
// address on the device: the lanes' Ports carry the pointers the bridge
// follows too.
Result allocateMapped(uint64_t bytes, char** out) {
  return allocateMappedAtHostAddress(bytes, "plan kernels bridging FIFOs to other hosts", out);
}

// A FIFO of its own allocation (owned), or carved from the reserve.
class MappedHostFifo : public transports::FifoMemory {
 public:
  MappedHostFifo(char* ptr, bool owned) : ptr_(ptr), owned_(owned) {}
  ~MappedHostFifo() override {
    if (owned_) freeHostWhenQuiet(ptr_);
  }
  MappedHostFifo(const MappedHostFifo&) = delete;
  MappedHostFifo& operator=(const MappedHostFifo&) = delete;

  char* base() const override { return ptr_; }
  Blob blob() const override { return {}; }

 private:
  char* ptr_;
  bool owned_;
};

class MappedHostFifoProvider : public transports::FifoMemoryProvider {
 public:
  MappedHostFifoProvider() = default;
  ~MappedHostFifoProvider() override {
    if (reserve_ != nullptr) freeHostWhenQuiet(reserve_);
  }
  MappedHostFifoProvider(const MappedHostFifoProvider&) = delete;
  MappedHostFifoProvider& operator=(const MappedHostFifoProvider&) = delete;

  Result reserve(uint64_t bytes) {
    BRAID_TRY(allocateMapped(bytes, &reserve_).context("reserving " + std::to_string(bytes) +
                                                      " bytes of mapped pinned memory for bridged FIFOs"));
    capacity_ = bytes;
    return Result::success();
  }

  const char* name() const override { return "mapped pinned host memory"; }

  Result create(uint64_t bytes, const transports::FifoImageWriter& writeImage,
                std::unique_ptr<transports::FifoMemory>* out) override {
    if (bytes == 0) return fail(ncclInvalidArgument, "the layout has 0 bytes");
    const uint64_t need = (bytes + 255) & ~uint64_t(255);
    char* ptr = nullptr;
    const bool carved = used_ + need <= capacity_;
    if (carved) {
      ptr = reserve_ + used_;
      used_ += need;
    } else {
      Result r = allocateMapped(bytes, &ptr);
      // A failed CUDA call must not surface at a later launch's error check.
      if (r.code() == ncclUnhandledCudaError) cudaGetLastError();
      BRAID_TRY(r.context("creating a FIFO of " + std::to_string(bytes) + " bytes in mapped pinned host memory"));
    }
    // The GPU reads it only once a launch is enqueued after this returns.
    writeImage(ptr);
    *out = std::make_unique<MappedHostFifo>(ptr, !carved);
    return Result::success();
  }

  Result open(const Blob&, uint64_t, std::unique_ptr<transports::FifoMemory>*) override {
    return fail(ncclInternalError, "a FIFO in mapped pinned host memory is bridged, never opened by a peer");
  }

 private:
  char* reserve_ = nullptr;
  uint64_t capacity_ = 0;
  uint64_t used_ = 0;
};

}  // namespace

std::unique_ptr<transports::FifoMemoryProvider> makeMappedHostFifoProvider() {
  return std::make_unique<MappedHostFifoProvider>();
}

Result makeReservedMappedHostFifoProvider(uint64_t reserveBytes,
                                          std::unique_ptr<transports::FifoMemoryProvider>* out) {
  auto provider = std::make_unique<MappedHostFifoProvider>();
  BRAID_TRY(provider->reserve(reserveBytes));
  *out = std::move(provider);
  return Result::success();
}

}  // namespace braid::p2p
