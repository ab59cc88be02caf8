#include "fake_device.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "immortal.h"

namespace fakecuda {

bool Position::reached() const {
  if (stream == nullptr) return true;
  std::lock_guard<std::mutex> lock(stream->mu_);
  return stream->completed_ >= count;
}

namespace {
std::atomic<uint64_t> gNextStreamId{1};
}  // namespace

Stream::Stream(int device, bool blocking, bool legacy)
    : device_(device), id_(gNextStreamId.fetch_add(1)), blocking_(blocking), legacy_(legacy),
      worker_([this] { serve(); }) {}

// Never runs in practice (the device keeps its streams for the process's
// life); a worker is joined only if it could end.
Stream::~Stream() {
  retire();
  if (worker_.joinable()) worker_.join();
}

void Stream::push(std::function<void()> work, std::vector<Position> after) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({std::move(work), std::move(after)});
    ++enqueued_;
  }
  cv_.notify_all();
}

Position Stream::end() {
  std::lock_guard<std::mutex> lock(mu_);
  return {this, enqueued_};
}

bool Stream::idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_ == enqueued_;
}

void Stream::waitFor(uint64_t count) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return completed_ >= count; });
}

void Stream::retire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    retired_ = true;
  }
  cv_.notify_all();
}

void Stream::serve() {
  for (;;) {
    Item* item = nullptr;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || retired_; });
      if (queue_.empty()) return;
      item = &queue_.front();  // deque: stays valid while later items are pushed
    }
    // Stream order across streams (events, the legacy stream): as a GPU's
    // front end, the stream waits here without blocking any other stream.
    for (const Position& p : item->after)
      if (p.stream != nullptr && p.stream != this) p.stream->waitFor(p.count);
    if (item->work) item->work();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.pop_front();
      ++completed_;
    }
    cv_.notify_all();
  }
}

namespace {

int deviceCountFromEnv() {
  const char* s = std::getenv("BRAID_FAKECUDA_DEVICES");
  const int n = s ? std::atoi(s) : 1;
  return n >= 1 && n <= 16 ? n : 1;
}

}  // namespace

Device::Device() : count_(deviceCountFromEnv()) {
  streams_.push_back(std::make_unique<Stream>(0, true, true));
  legacy_ = streams_.back().get();
}

// Never destroyed: worker threads may still run when the process exits, and
// allocations must outlive every static destructor that frees CUDA memory.
Device& Device::get() {
  return immortal<Device>();
}

Stream* Device::createStream(int device, bool blocking) {
  std::lock_guard<std::mutex> lock(mu_);
  streams_.push_back(std::make_unique<Stream>(device, blocking, false));
  live_.push_back(streams_.back().get());
  return live_.back();
}

Stream* Device::lookup(cudaStream_t handle, bool* known) {
  *known = true;
  if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread) return legacy_;
  std::lock_guard<std::mutex> lock(mu_);
  for (Stream* s : live_)
    if (reinterpret_cast<cudaStream_t>(s) == handle) return s;
  *known = false;
  return nullptr;
}

void Device::destroyStream(Stream* s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < live_.size(); ++i)
      if (live_[i] == s) {
        live_.erase(live_.begin() + long(i));
        break;
      }
  }
  s->retire();
}

void Device::enqueue(Stream* s, std::function<void()> work, std::vector<Position> after) {
  std::lock_guard<std::mutex> lock(mu_);
  // The legacy default stream waits for all work on blocking streams, and
  // blocking streams wait for the legacy stream (non-blocking ones do not).
  if (s->legacy()) {
    for (Stream* other : live_)
      if (other->blocking()) after.push_back(other->end());
  } else if (s->blocking()) {
    after.push_back(legacy_->end());
  }
  s->push(std::move(work), std::move(after));
}

void Device::synchronize() {
  std::vector<Position> ends;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ends.push_back(legacy_->end());
    for (Stream* s : live_) ends.push_back(s->end());
  }
  for (const Position& p : ends) p.stream->waitFor(p.count);
}

bool Device::anyBusy() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!legacy_->idle()) return true;
  for (Stream* s : live_)
    if (!s->idle()) return true;
  return false;
}

void* Device::allocate(size_t bytes, MemKind kind, int device, bool mapped) {
  // 256-byte alignment, as cudaMalloc's; at least one byte so every
  // allocation has its own address.
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  void* p = std::aligned_alloc(256, rounded);
  if (p == nullptr) return nullptr;
  // A recognisable pattern rather than zeros: code must not rely on CUDA
  // memory starting cleared.
  std::memset(p, 0xA5, rounded);
  std::lock_guard<std::mutex> lock(mu_);
  memory_[reinterpret_cast<uintptr_t>(p)] = {rounded, kind, device, mapped};
  return p;
}

uint64_t Device::bytesInUse(MemKind kind) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t bytes = 0;
  for (const auto& [at, a] : memory_)
    if (a.kind == kind) bytes += a.bytes;
  return bytes;
}

bool Device::release(void* p, MemKind kind, bool keep) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memory_.find(reinterpret_cast<uintptr_t>(p));
    if (it == memory_.end() || it->second.kind != kind) return false;
    memory_.erase(it);
    if (keep) {
      kept_.push_back(p);
      return true;
    }
  }
  std::free(p);
  return true;
}

bool Device::find(const void* p, uintptr_t* base, Allocation* out) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = memory_.upper_bound(a);
  if (it == memory_.begin()) return false;
  --it;
  if (a >= it->first + it->second.bytes) return false;
  *base = it->first;
  *out = it->second;
  return true;
}

}  // namespace fakecuda
