#include "engine/device/cuda_lane_memory.h"

#include <vector>

#include "base/cuda_util.h"
#include "transports/p2p/p2p_fifo_memory.h"

namespace braid {

namespace {

// Ports come from slabs of this many: one cudaMalloc (which may wait for the
// whole device, a kernel of another rank of this process included) per slab,
// made while the FIFOs are offered, not one per Port whenever a lane first
// needs one.
constexpr size_t kPortsPerSlab = 256;

class CudaLaneMemory : public lanes::LaneMemory {
 public:
  explicit CudaLaneMemory(int device) : device_(device), fifos_(makeCudaFifoProvider(device)) {}
  ~CudaLaneMemory() override {
    const DeviceGuard guard(device_);
    for (void* p : slabs_)
      if (cudaFree(p) != cudaSuccess) cudaGetLastError();  // at exit the runtime may be gone
  }
  CudaLaneMemory(const CudaLaneMemory&) = delete;
  CudaLaneMemory& operator=(const CudaLaneMemory&) = delete;

  // One provider: it shares by pointer within the process and by IPC beyond.
  FifoMemoryProvider& provider(bool) override { return *fifos_; }
  // CUDA IPC reaches every GPU of the host, whatever NCCL_SHM_DISABLE says.
  bool reaches(ncclComm* comm, int) const override { return lanes::PortTable::reachable(comm); }

  // A slab of Ports, so that the first ones need no allocation.
  Result addSlab() {
    const DeviceGuard guard(device_);
    BRAID_TRY(guard.status());
    void* p = nullptr;
    BRAID_CUDA_TRY(cudaMalloc(&p, kPortsPerSlab * sizeof(exec::Port)));
    slabs_.push_back(p);
    used_ = 0;
    return Result::success();
  }

  Result makePort(const exec::FifoView& fifo, exec::Port** out) override {
    const DeviceGuard guard(device_);
    BRAID_TRY(guard.status());
    if (used_ == kPortsPerSlab || slabs_.empty()) BRAID_TRY(addSlab());
    exec::Port* at = static_cast<exec::Port*>(slabs_.back()) + used_;
    exec::Port port;
    port.fifo = fifo;
    // On a stream of its own: no wait for the device's other work.
    BRAID_TRY(copyToDeviceNow(at, &port, sizeof(port)));
    ++used_;
    *out = at;
    return Result::success();
  }

 private:
  int device_;
  std::unique_ptr<FifoMemoryProvider> fifos_;
  std::vector<void*> slabs_;
  size_t used_ = 0;  // Ports taken from the last slab
};

}  // namespace

std::unique_ptr<lanes::LaneMemory> makeCudaLaneMemory(int device) { return std::make_unique<CudaLaneMemory>(device); }

Result makeReservedCudaLaneMemory(int device, std::unique_ptr<lanes::LaneMemory>* out) {
  auto memory = std::make_unique<CudaLaneMemory>(device);
  BRAID_TRY(memory->addSlab());
  *out = std::move(memory);
  return Result::success();
}

}  // namespace braid
