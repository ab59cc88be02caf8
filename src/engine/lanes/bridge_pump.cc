#include "engine/lanes/bridge_pump.h"

#include <algorithm>
#include <chrono>

#include "base/log.h"
#include "kernels/executor/device_memory_model.h"

namespace braid::lanes {

namespace {

// Pumps between two looks at the launches: ended() may be a driver call.
constexpr int kPumpsPerLook = 256;
// At destruction, how long messages still in the bridge may take to leave.
constexpr auto kFlushWait = std::chrono::seconds(10);

}  // namespace

BridgePump::BridgePump(NetBridge* bridge) : bridge_(bridge), thread_([this] { loop(); }) {}

BridgePump::~BridgePump() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  if (drop_) return;
  // What the last kernels posted still leaves before the connections close
  // (a peer may still wait for it), unless the bridge failed or the peers
  // stop reading for kFlushWait.
  const auto until = std::chrono::steady_clock::now() + kFlushWait;
  for (uint64_t idle = 0; !bridge_->flushed() && bridge_->error().ok();) {
    if (std::chrono::steady_clock::now() > until) {
      BRAID_WARN("a network bridge of plan kernels still held messages after %lld s at the communicator's "
                 "destruction: dropped (a peer still waiting for them will fail)",
                 static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(kFlushWait).count()));
      return;
    }
    pumpBurst(1, &idle);
  }
}

void BridgePump::pumpBurst(int pumps, uint64_t* idle) {
  for (int i = 0; i < pumps; ++i) {
    if (bridge_->pump()) {
      *idle = 0;
    } else {
      executor::pauseAfter(++*idle);
    }
  }
}

void BridgePump::add(std::function<bool()> ended) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    launches_.push_back(std::move(ended));
  }
  cv_.notify_all();
}

void BridgePump::drop() {
  std::lock_guard<std::mutex> lock(mu_);
  drop_ = true;
}

bool BridgePump::anyRunning() {
  launches_.erase(std::remove_if(launches_.begin(), launches_.end(), [](const auto& ended) { return ended(); }),
                  launches_.end());
  return !launches_.empty();
}

void BridgePump::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  uint64_t idle = 0;
  for (;;) {
    if (stop_) return;
    // After the last launch ended, until what it posted has left (a failed
    // bridge sends nothing more).
    if (!anyRunning() && (bridge_->flushed() || !bridge_->error().ok())) {
      cv_.wait(lock, [this] { return stop_ || !launches_.empty(); });
      idle = 0;
      continue;
    }
    lock.unlock();
    pumpBurst(kPumpsPerLook, &idle);
    lock.lock();
  }
}

}  // namespace braid::lanes
