#include "engine/device/cuda_lane_memory.h"

#include <vector>

#include "base/cuda_util.h"
#include "transports/p2p/p2p_fifo_memory.h"

namespace braid {

namespace {

class CudaLaneMemory : public lanes::LaneMemory {
 public:
  explicit CudaLaneMemory(int device) : device_(device), fifos_(makeCudaFifoProvider(device)) {}
  ~CudaLaneMemory() override {
    const DeviceGuard guard(device_);
    for (void* p : ports_)
      if (cudaFree(p) != cudaSuccess) cudaGetLastError();  // at exit the runtime may be gone
  }
  CudaLaneMemory(const CudaLaneMemory&) = delete;
  CudaLaneMemory& operator=(const CudaLaneMemory&) = delete;

  // One provider: it shares by pointer within the process and by IPC beyond.
  FifoMemoryProvider& provider(bool) override { return *fifos_; }
  // CUDA IPC reaches every GPU of the host, whatever NCCL_SHM_DISABLE says.
  bool reaches(ncclComm* comm, int) const override { return lanes::PortTable::reachable(comm); }

  Result makePort(const exec::FifoView& fifo, exec::Port** out) override {
    const DeviceGuard guard(device_);
    BRAID_TRY(guard.status());
    void* p = nullptr;
    BRAID_CUDA_TRY(cudaMalloc(&p, sizeof(exec::Port)));
    ports_.push_back(p);
    exec::Port port;
    port.fifo = fifo;
    BRAID_TRY(copyToDeviceNow(p, &port, sizeof(port)));
    *out = static_cast<exec::Port*>(p);
    return Result::success();
  }

 private:
  int device_;
  std::unique_ptr<FifoMemoryProvider> fifos_;
  std::vector<void*> ports_;
};

}  // namespace

std::unique_ptr<lanes::LaneMemory> makeCudaLaneMemory(int device) { return std::make_unique<CudaLaneMemory>(device); }

}  // namespace braid
