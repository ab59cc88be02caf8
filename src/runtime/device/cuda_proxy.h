// The proxy thread of one communicator's device calls: it waits until a job's
// contributions are in pinned memory, runs the host plan on them and publishes
// the job's sequence to the stream-wait kernels. Jobs run in issue order.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>

#include "core/result.h"
#include "core/task.h"
#include "runtime/device/cuda_staging.h"
#include "runtime/device/device.h"

namespace braid {

// An owned CUDA event (timing disabled).
class CudaEvent {
 public:
  CudaEvent() = default;
  ~CudaEvent();
  CudaEvent(CudaEvent&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& o) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  Result record(cudaStream_t stream);  // creates the event on first use
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// What the proxy runs for one communicator's calls of one group.
struct DeviceJob {
  uint64_t sequence = 0;          // published when the host work ends, failed or not
  std::vector<Task> staged;       // the calls, their buffers in pinned memory
  std::vector<CudaEvent> ready;   // recorded after the copies of the contributions
  StagedRunner run;
};

// Staging memory of a job, in use until the copies back to the device are done.
struct InflightJob {
  std::vector<PinnedBlock> blocks;
  std::vector<CudaEvent> done;
};

class DeviceProxy {
 public:
  DeviceProxy(ncclComm* comm, int device) : comm_(comm), device_(device) {}
  // Stops the thread (queued jobs run first, or fail at once after an abort),
  // then frees the staging memory once the streams are done with it.
  ~DeviceProxy();
  DeviceProxy(const DeviceProxy&) = delete;
  DeviceProxy& operator=(const DeviceProxy&) = delete;

  Result start();
  int device() const { return device_; }
  StagingPool& pool() { return pool_; }
  const MappedWords& words() const { return words_; }

  void submit(DeviceJob&& job);
  void drain();
  void abort() { words_.setAbort(); }
  void addInflight(InflightJob&& job);
  // Returns the blocks of finished jobs to the pool.
  void reclaim();

 private:
  void loop();
  void runJob(DeviceJob& job);
  Result waitReady(DeviceJob& job);
  bool finished(const InflightJob& job) const;
  // Waits (bounded) for every inflight job; false when some did not finish.
  bool waitInflight();

  ncclComm* comm_;
  int device_;
  StagingPool pool_;
  MappedWords words_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<DeviceJob> queue_;
  bool busy_ = false;
  bool stop_ = false;
  bool failed_ = false;  // proxy thread only: later jobs are skipped
  std::mutex inflightMu_;
  std::vector<InflightJob> inflight_;
  std::thread thread_;
};

}  // namespace braid
