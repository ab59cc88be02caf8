#include "runtime/device/cuda_proxy.h"

#include <chrono>
#include <cstring>
#include <thread>

#include "core/comm.h"
#include "core/log.h"
#include "runtime/device/cuda_util.h"

namespace braid {

namespace {

// How long destruction waits for the streams to finish with staging memory
// before it leaks the memory rather than free it under a copy.
constexpr auto kReleaseWait = std::chrono::seconds(30);

// Spin, then yield, then sleep: a stream may take long to reach the call.
void backoff(int polls) {
  if (polls < 1000) std::this_thread::yield();
  else std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// Device-resident PreMulSum scalars reach pinned memory with the inputs
// (stageIn); once the job's events are done they are values.
void takeStagedScalars(std::vector<Task>* tasks) {
  for (Task& t : *tasks)
    if (t.deviceScalar) {
      std::memcpy(t.op.scalar, t.deviceScalar, typeSize(t.type));
      t.deviceScalar = nullptr;
    }
}

}  // namespace

CudaEvent::~CudaEvent() {
  if (event_) cudaEventDestroy(event_);
}

CudaEvent& CudaEvent::operator=(CudaEvent&& o) noexcept {
  if (this != &o) {
    if (event_) cudaEventDestroy(event_);
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}

Result CudaEvent::record(cudaStream_t stream) {
  if (!event_) BRAID_CUDA_TRY(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  BRAID_CUDA_TRY(cudaEventRecord(event_, stream));
  return Result::success();
}

Result DeviceProxy::start() {
  DeviceGuard guard(device_);
  BRAID_TRY(guard.status());
  BRAID_TRY(words_.allocate());
  thread_ = std::thread([this] { loop(); });
  return Result::success();
}

DeviceProxy::~DeviceProxy() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  DeviceGuard guard(device_);
  if (waitInflight()) return;
  // A stream has not reached the copies back (or never will): what it may
  // still touch is leaked, not freed.
  words_.leak();
  std::lock_guard<std::mutex> lock(inflightMu_);
  for (const InflightJob& job : inflight_)
    if (!finished(job))
      for (const PinnedBlock& b : job.blocks) pool_.abandon(b);
}

void DeviceProxy::submit(DeviceJob&& job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
}

void DeviceProxy::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void DeviceProxy::addInflight(InflightJob&& job) {
  std::lock_guard<std::mutex> lock(inflightMu_);
  inflight_.push_back(std::move(job));
}

bool DeviceProxy::finished(const InflightJob& job) const {
  for (const CudaEvent& e : job.done) {
    const cudaError_t err = cudaEventQuery(e.get());
    if (err == cudaSuccess) continue;
    cudaGetLastError();  // NotReady is recorded as this thread's last error too
    return false;
  }
  return true;
}

void DeviceProxy::reclaim() {
  std::lock_guard<std::mutex> lock(inflightMu_);
  size_t kept = 0;
  for (size_t i = 0; i < inflight_.size(); ++i) {
    if (finished(inflight_[i])) {
      for (const PinnedBlock& b : inflight_[i].blocks) pool_.release(b);
      continue;
    }
    if (kept != i) inflight_[kept] = std::move(inflight_[i]);
    ++kept;
  }
  inflight_.resize(kept);
}

bool DeviceProxy::waitInflight() {
  const auto until = std::chrono::steady_clock::now() + kReleaseWait;
  for (int polls = 0;; ++polls) {
    reclaim();
    {
      std::lock_guard<std::mutex> lock(inflightMu_);
      if (inflight_.empty()) return true;
    }
    if (std::chrono::steady_clock::now() > until) break;
    backoff(polls);
  }
  BRAID_WARN("rank %d: device copies of earlier calls did not complete within %lld s of the "
             "communicator's destruction; their staging memory is leaked",
             comm_->rank, static_cast<long long>(kReleaseWait.count()));
  return false;
}

void DeviceProxy::loop() {
  // The proxy's CUDA calls (event queries) go to the communicator's device,
  // never create a context on device 0.
  if (cudaSetDevice(device_) != cudaSuccess) cudaGetLastError();
  for (;;) {
    DeviceJob job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !queue_.empty() || stop_; });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    runJob(job);
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
    }
    cv_.notify_all();
  }
}

Result DeviceProxy::waitReady(DeviceJob& job) {
  for (CudaEvent& e : job.ready) {
    for (int polls = 0;; ++polls) {
      const cudaError_t err = cudaEventQuery(e.get());
      if (err == cudaSuccess) break;
      cudaGetLastError();  // NotReady is recorded as this thread's last error too
      if (err != cudaErrorNotReady) {
        return cudaFailure("cudaEventQuery (copy of a contribution to pinned memory)", err);
      }
      if (comm_->abortFlag)
        return fail(ncclSystemError, "the communicator was aborted while its device call waited for its stream");
      backoff(polls);
    }
  }
  return Result::success();
}

// A failed job still publishes its sequence, so the user's streams go on (with
// undefined results) and ncclCommGetAsyncError reports the failure.
void DeviceProxy::runJob(DeviceJob& job) {
  Result r;
  if (failed_ || comm_->abortFlag) {
    r = fail(ncclSystemError, "skipped: the communicator failed or was aborted before this device call ran");
  } else {
    r = waitReady(job);
    if (r.ok()) {
      takeStagedScalars(&job.staged);
      r = job.run(job.staged);
    }
  }
  if (!r.ok() && !failed_) {
    BRAID_WARN("rank %d: device call #%llu failed: %s", comm_->rank,
               static_cast<unsigned long long>(job.sequence), r.message().c_str());
    setCommError(comm_, r);
    failed_ = true;
  }
  job.ready.clear();
  words_.publish(job.sequence);
}

}  // namespace braid
