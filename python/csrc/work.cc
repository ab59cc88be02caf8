#include "work.h"

#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>

namespace braid_torch {

namespace {

std::vector<c10::Device> futureDevices(const std::shared_ptr<DeviceSync>& device) {
  if (!device) return {};
  return {device->device()};
}

}  // namespace

BraidWork::BraidWork(int rank, c10d::OpType type, std::string description, std::vector<at::Tensor> results,
                     std::shared_ptr<DeviceSync> device)
    : c10d::Work(rank, type),
      description_(std::move(description)),
      results_(std::move(results)),
      device_(std::move(device)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                       futureDevices(device_))) {}

int BraidWork::sourceRank() const {
  const int src = source_ ? source_->load() : -1;
  TORCH_CHECK(src >= 0, "braid: ", description_,
              source_ ? " has not received yet: wait for it before asking its source"
                      : " is not a receive: only recv works have a source rank");
  return src;
}

bool BraidWork::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!completed_) return false;
  return exception_ || !device_ || device_->query();
}

bool BraidWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

std::exception_ptr BraidWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

std::vector<at::Tensor> BraidWork::result() { return results_; }

bool BraidWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    C10_THROW_ERROR(DistBackendError, "braid: " + description_ + " did not complete within the " +
                                          std::to_string(timeout.count()) +
                                          " ms given to wait(); it is still running");
  }
  if (exception_) std::rethrow_exception(exception_);
  lock.unlock();
  if (device_) device_->blockCurrentStream();
  return true;
}

void BraidWork::synchronize() {
  wait();
  if (device_) device_->synchronize();
}

c10::intrusive_ptr<c10::ivalue::Future> BraidWork::getFuture() { return future_; }

void BraidWork::complete(std::exception_ptr error) {
  finish(error);
  if (error) {
    future_->setError(error);
    return;
  }
  auto mark = [&] { future_->markCompleted(c10::IValue(results_)); };
  if (device_) device_->withStream(mark);
  else mark();
}

}  // namespace braid_torch
