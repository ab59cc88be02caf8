// Receiving from any source (recv without a source, Gloo's recvAnysource) on
// top of NCCL-style point-to-point, where every receive names its peer and the
// messages between two ranks match in issue order.
//
// Every rank counts the sends it issues to each peer and publishes the counts in
// the group's store, from a thread of its own so a send never waits for the
// store. A rank counts the receives it runs from each peer. A receive from any
// source waits until some peer has published more sends to this rank than this
// rank has received from it; that peer's next message is the one to take, and
// an ordinary receive from it takes it. Only send() and recv() count: the
// collectives' own messages match among themselves in the same order on both
// sides. Tags are not matched (NCCL has none), as for send and recv.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace braid_torch {

class AnySourceLedger {
 public:
  AnySourceLedger(c10::intrusive_ptr<c10d::Store> store, int rank, int size);
  ~AnySourceLedger();  // publishes what is pending, then stops the thread
  AnySourceLedger(const AnySourceLedger&) = delete;
  AnySourceLedger& operator=(const AnySourceLedger&) = delete;

  // send() issued to `dst`, in issue order; published soon after.
  void noteSend(int dst);
  // A receive from `src` ran (a named one, or the one pickSource chose).
  void noteReceive(int src);
  // A peer that has sent this rank a message not yet received (in turn, so no
  // peer is starved): polls the store until there is one. Throws after
  // `timeout` with each peer's counts, or when `stop` returns true.
  int pickSource(std::chrono::milliseconds timeout, const std::function<bool()>& stop);

 private:
  std::string key(int src, int dst) const;
  void publishLoop();

  c10::intrusive_ptr<c10d::Store> store_;
  const int rank_;
  const int size_;
  std::vector<int64_t> received_;  // per source; the worker's, under mutex_
  int nextCandidate_ = 0;          // fairness: the search starts after the last pick

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<int64_t> pending_;  // sends not yet published, per destination
  bool stopping_ = false;
  std::thread publisher_;         // started by the first send
};

}  // namespace braid_torch
