// Communicators of one job created in this process (ncclCommInitAll), for
// unit tests of internals that need real ranks: a real bootstrap, real peers
// and the real transport list (inproc between them, TCP for byte streams).
//
//   braidtest::LocalComms comms(2);
//   ASSERT_TRUE(comms.ok()) << comms.error();
//   comms.onEveryRank([&](int rank) { ... comms[rank] ... });
//
// BRAID_TIMEOUT is short while the communicators are made, so a test that
// leaves a rank waiting fails within seconds instead of hanging for 10 minutes.
#ifndef BRAID_TESTS_COMMON_LOCAL_COMMS_H_
#define BRAID_TESTS_COMMON_LOCAL_COMMS_H_

#include <nccl.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/scoped_env.h"
#include "engine/comm.h"

namespace braidtest {

class LocalComms {
 public:
  explicit LocalComms(int n, std::vector<std::pair<std::string, std::string>> env = {}) : comms_(size_t(n)) {
    env.push_back({"BRAID_TIMEOUT", "10"});
    ScopedEnv scoped(env);
    const ncclResult_t r = ncclCommInitAll(comms_.data(), n, nullptr);
    if (r != ncclSuccess) {
      error_ = std::string("ncclCommInitAll: ") + ncclGetErrorString(r) + ": " + ncclGetLastError(nullptr);
      comms_.assign(size_t(n), nullptr);
    }
  }
  ~LocalComms() {
    for (ncclComm_t c : comms_)
      if (c) ncclCommDestroy(c);
  }
  LocalComms(const LocalComms&) = delete;
  LocalComms& operator=(const LocalComms&) = delete;

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  int size() const { return int(comms_.size()); }
  ncclComm* operator[](int rank) const { return comms_[size_t(rank)]; }

  // Runs body(rank) on a thread per rank, all at once (each blocking call
  // needs its peers in it too), and returns when all are done.
  void onEveryRank(const std::function<void(int rank)>& body) const {
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r) threads.emplace_back([&body, r] { body(r); });
    for (auto& t : threads) t.join();
  }

 private:
  std::vector<ncclComm_t> comms_;
  std::string error_;
};

}  // namespace braidtest

#endif  // BRAID_TESTS_COMMON_LOCAL_COMMS_H_
