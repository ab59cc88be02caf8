#include "any_source.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace braid_torch {

AnySourceLedger::AnySourceLedger(c10::intrusive_ptr<c10d::Store> store, int rank, int size)
    : store_(std::move(store)), rank_(rank), size_(size), received_(size, 0), pending_(size, 0) {}

AnySourceLedger::~AnySourceLedger() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (publisher_.joinable()) publisher_.join();
}

std::string AnySourceLedger::key(int src, int dst) const {
  return "braid_any_source/" + std::to_string(src) + ">" + std::to_string(dst);
}

void AnySourceLedger::noteSend(int dst) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++pending_[dst];
    if (!publisher_.joinable()) publisher_ = std::thread([this] { publishLoop(); });
  }
  wake_.notify_one();
}

void AnySourceLedger::noteReceive(int src) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++received_[src];
}

void AnySourceLedger::publishLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    std::vector<int64_t> batch(size_, 0);
    bool any = false;
    for (int d = 0; d < size_; ++d) {
      batch[d] = pending_[d];
      pending_[d] = 0;
      any = any || batch[d] != 0;
    }
    if (!any) {
      if (stopping_) return;
      wake_.wait(lock);
      continue;
    }
    lock.unlock();
    std::string error;
    for (int d = 0; d < size_ && error.empty(); ++d) {
      if (batch[d] == 0) continue;
      try {
        store_->add(key(rank_, d), batch[d]);
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    if (!error.empty()) {
      // Receivers from any source would time out (their message names the
      // counts they saw); say why here, where it happened.
      TORCH_WARN("braid: rank ", rank_, " cannot publish its send counts for receives from any source: ", error);
      return;
    }
    lock.lock();
  }
}

int AnySourceLedger::pickSource(std::chrono::milliseconds timeout, const std::function<bool()>& stop) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::microseconds(50);
  std::vector<int64_t> published(size_, 0);
  for (;;) {
    for (int i = 0; i < size_; ++i) {
      const int src = (nextCandidate_ + i) % size_;
      if (src == rank_) continue;
      published[src] = store_->add(key(src, rank_), 0);
      std::lock_guard<std::mutex> lock(mutex_);
      if (published[src] > received_[src]) {
        nextCandidate_ = (src + 1) % size_;
        return src;
      }
    }
    if (stop()) throw std::runtime_error("the process group was aborted");
    if (std::chrono::steady_clock::now() >= deadline) {
      std::ostringstream msg;
      msg << "receive from any source on rank " << rank_ << ": no rank sent a message within " << timeout.count()
          << " ms (sends to this rank / received from each rank:";
      std::lock_guard<std::mutex> lock(mutex_);
      for (int src = 0; src < size_; ++src)
        if (src != rank_) msg << " rank " << src << " " << published[src] << "/" << received_[src];
      msg << ")";
      throw std::runtime_error(msg.str());
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
}

}  // namespace braid_torch
