// The network progress of plan kernels whose lanes have FIFOs with ranks on
// other hosts: the lanes run on the GPU, so no host runner pumps their
// bridge (net_bridge.h) between turns; this thread does, from before such a
// launch starts until it has ended and every message it posted has left.
// Idle (no such launch, nothing left to send) it sleeps on a condition
// variable: a communicator without launches in flight costs no core.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/lanes/net_bridge.h"

namespace braid::lanes {

class BridgePump {
 public:
  // `bridge` outlives the pump.
  explicit BridgePump(NetBridge* bridge);
  // Stops the thread, then sends what is still in the bridge (up to 10 s).
  ~BridgePump();
  BridgePump(const BridgePump&) = delete;
  BridgePump& operator=(const BridgePump&) = delete;

  // A launch that uses the bridge, pumped from now on; ended() says when its
  // lanes have stopped (asked now and then from the pump's thread, so it must
  // not block). Added before the launch: one that blocks until its kernel
  // ends (CUDA_LAUNCH_BLOCKING=1) is pumped meanwhile.
  void add(std::function<bool()> ended);
  // Messages still in the bridge at destruction are dropped, not sent (the
  // communicator was aborted).
  void drop();

 private:
  void loop();
  // `pumps` pumps of the bridge, pausing longer the longer nothing moves.
  void pumpBurst(int pumps, uint64_t* idle);
  // Drops the launches that say they ended; true while some remain.
  bool anyRunning();  // mu_ held

  NetBridge* bridge_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::function<bool()>> launches_;
  bool stop_ = false;
  bool drop_ = false;
  std::thread thread_;
};

}  // namespace braid::lanes
