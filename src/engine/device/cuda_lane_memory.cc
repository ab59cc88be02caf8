#include "engine/device/cuda_lane_memory.h"

#include <vector>

#include "base/cuda_quiet_free.h"
#include "base/cuda_util.h"
#include "transports/p2p/mapped_host_fifo.h"
#include "transports/p2p/p2p_fifo_memory.h"

namespace braid::device {

namespace {

// Ports come from slabs of this many: one cudaMalloc (which may wait for the
// whole device, a kernel of another rank of this process included) per slab,
// made while the FIFOs are offered, not one per Port whenever a lane first
// needs one.
constexpr size_t kPortsPerSlab = 256;

class CudaLaneMemory : public lanes::LaneMemory {
 public:
  explicit CudaLaneMemory(int device)
      : device_(device), fifos_(p2p::makeCudaFifoProvider(device)), mapped_(p2p::makeMappedHostFifoProvider()) {}
  ~CudaLaneMemory() override {
    for (void* p : slabs_) freeDeviceWhenQuiet(p, device_);
  }
  CudaLaneMemory(const CudaLaneMemory&) = delete;
  CudaLaneMemory& operator=(const CudaLaneMemory&) = delete;

  // Peers in this process: FIFOs from the arena when there is one (by
  // pointer); others: one allocation each, shared by CUDA IPC.
  transports::FifoMemoryProvider& provider(bool sameProcess) override {
    return sameProcess && arena_ ? *arena_ : *fifos_;
  }
  // A peer on another host: its FIFO is bridged through mapped pinned memory.
  transports::FifoMemoryProvider& bridgedProvider() override { return *mapped_; }
  // Past the host lanes' bridge channels (64 to 191).
  int bridgeChannelOffset() const override { return 256; }
  // CUDA IPC reaches every GPU of the host, whatever NCCL_SHM_DISABLE says.
  bool reaches(ncclComm* comm, int peer) const override { return lanes::PortTable::sharesHostWith(comm, peer); }

  Result reserveFifos(uint64_t bytes) { return p2p::makeCudaArenaFifoProvider(device_, bytes, &arena_); }
  Result reserveBridged(uint64_t bytes) {
    const DeviceGuard guard(device_);
    BRAID_TRY(guard.status());
    return p2p::makeReservedMappedHostFifoProvider(bytes, &mapped_);
  }

  // A slab of Ports, so that the first ones need no allocation.
  Result addSlab() {
    const DeviceGuard guard(device_);
    BRAID_TRY(guard.status());
    void* p = nullptr;
    BRAID_CUDA_TRY(cudaMalloc(&p, kPortsPerSlab * sizeof(executor::Port)));
    slabs_.push_back(p);
    used_ = 0;
    return upload_.prepare();  // with the first slab: before any kernel runs
  }

  Result makePort(const executor::FifoView& fifo, executor::Port** out) override {
    const DeviceGuard guard(device_);
    BRAID_TRY(guard.status());
    if (used_ == kPortsPerSlab || slabs_.empty()) BRAID_TRY(addSlab());
    executor::Port* at = static_cast<executor::Port*>(slabs_.back()) + used_;
    executor::Port port;
    port.fifo = fifo;
    // Pinned, on a stream of its own: no wait for the device's other work.
    BRAID_TRY(upload_.copy(at, &port, sizeof(port)));
    ++used_;
    *out = at;
    return Result::success();
  }

 private:
  int device_;
  std::unique_ptr<transports::FifoMemoryProvider> fifos_;
  std::unique_ptr<transports::FifoMemoryProvider> arena_;  // FIFOs for peers in this process
  std::unique_ptr<transports::FifoMemoryProvider> mapped_;  // bridged FIFOs
  std::vector<void*> slabs_;
  size_t used_ = 0;  // Ports taken from the last slab
  PinnedUpload upload_;
};

}  // namespace

std::unique_ptr<lanes::LaneMemory> makeCudaLaneMemory(int device) { return std::make_unique<CudaLaneMemory>(device); }

Result makeReservedCudaLaneMemory(int device, size_t arenaBytes, size_t bridgedBytes,
                                  std::unique_ptr<lanes::LaneMemory>* out) {
  auto memory = std::make_unique<CudaLaneMemory>(device);
  BRAID_TRY(memory->addSlab());
  BRAID_TRY(memory->reserveFifos(arenaBytes));
  if (bridgedBytes > 0) BRAID_TRY(memory->reserveBridged(bridgedBytes));
  *out = std::move(memory);
  return Result::success();
}

}  // namespace braid::device
