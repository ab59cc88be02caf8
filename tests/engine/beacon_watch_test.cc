// src/engine/lanes/beacon_watch: the watchdog of lanes the host cannot read
// (a plan kernel's), proven without a GPU. The lanes run as CUDA blocks do:
// each on a thread of its own, to its end, never resumed, polling an abort
// word; the watch sees them only through their beacons, as it sees a kernel's
// through mapped memory. The communicators, their FIFOs and the plans are the
// engine's own (two ranks of this process over the inproc transport).
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.h"
#include "common/local_comms.h"
#include "engine/comm.h"
#include "engine/fingerprint.h"
#include "engine/lanes/beacon_watch.h"
#include "engine/lanes/host_lanes.h"
#include "kernels/executor/host_lane_runner.h"
#include "reduce/host_reduce.h"

namespace braid {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kCount = 4096;

// Both ranks' calls of one allreduce, planned and connected by the engine;
// each rank's lanes laid out to run as blocks with beacons.
class DeviceLikeRanks {
 public:
  explicit DeviceLikeRanks(braidtest::LocalComms& comms) : comms_(comms) {
    for (int r = 0; r < 2; ++r) {
      in_[r].assign(kCount, float(r + 1));
      out_[r].assign(kCount, 0.0f);
      engine::Task t;
      t.comm = comms[r];
      t.coll = schedule::Collective::AllReduce;
      t.count = kCount;
      t.type = ncclFloat32;
      t.op = reduce::makeBuiltinOp(ncclSum, ncclFloat32, 2);
      t.sendbuff = in_[r].data();
      t.recvbuff = out_[r].data();
      t.sequence = t.callNumber = 1;
      tasks_.push_back(t);
    }
    prepared_ = lanes::prepareLaneGroup(tasks_, &group_);
    beacons_.resize(group_.runs.size());
    for (size_t i = 0; i < group_.runs.size(); ++i) {
      executor::LaneExec& L = *group_.runs[i].exec;
      L.wait.resumable = false;
      L.wait.beacon = &beacons_[i];
      L.wait.abortFlag = &abort_;
    }
  }

  const Result& prepared() const { return prepared_; }

  // A watch over rank r's lanes (the communicator's own FIFOs and program).
  // `replay`: as a launch of a CUDA graph's is.
  std::unique_ptr<lanes::BeaconWatch> watch(const std::vector<int>& ranks, lanes::WatchedReplay replay = {}) {
    auto g = std::make_unique<lanes::LaneGroup>();
    for (int r : ranks) {
      const lanes::CommRun& c = *group_.comms[size_t(r)];
      lanes::watchLanes(g.get(), c.comm, c.ports, c.tasks, c.program, &beacons_[firstRun(r)]);
    }
    return std::make_unique<lanes::BeaconWatch>(
        std::move(g), [this] { __atomic_store_n(&abort_, 1u, __ATOMIC_SEQ_CST); }, nullptr, std::move(replay));
  }
  bool aborted() const { return __atomic_load_n(&abort_, __ATOMIC_SEQ_CST) != 0; }

  // Starts rank r's lanes, each on a thread, as a kernel's blocks.
  void launch(int r) {
    for (size_t i = 0; i < group_.runs.size(); ++i) {
      if (group_.runs[i].owner->comm != comms_[r]) continue;
      executor::LaneExec* L = group_.runs[i].exec;
      statuses_.push_back(executor::ExecStatus::Ok);
      const size_t slot = statuses_.size() - 1;
      blocks_.emplace_back([this, L, slot] { statuses_[slot] = executor::runLaneOnHost(*L); });
    }
  }
  std::vector<executor::ExecStatus> join() {
    for (auto& t : blocks_) t.join();
    blocks_.clear();
    return statuses_;
  }
  ~DeviceLikeRanks() {
    __atomic_store_n(&abort_, 1u, __ATOMIC_SEQ_CST);
    join();
  }

  const executor::LaneBeacon& beacon(size_t i) const { return beacons_[i]; }
  executor::LaneBeacon& beacon(size_t i) { return beacons_[i]; }
  size_t lanes() const { return beacons_.size(); }
  const lanes::LaneRun& run(size_t i) const { return group_.runs[i]; }
  const std::vector<float>& out(int r) const { return out_[r]; }
  // Makes rank r's messages those of another call.
  void changeFingerprintOf(int r) {
    lanes::CommRun& c = *group_.comms[size_t(r)];
    auto* ops = reinterpret_cast<executor::OpBuffers*>(reinterpret_cast<char*>(c.image.data()) + c.opsOffset);
    ops[0].fingerprint ^= 0x5a5a5a5au;
  }

 private:
  size_t firstRun(int r) const {
    for (size_t i = 0; i < group_.runs.size(); ++i)
      if (group_.runs[i].owner->comm == comms_[r]) return i;
    return group_.runs.size();
  }

  braidtest::LocalComms& comms_;
  std::vector<float> in_[2], out_[2];
  std::vector<engine::Task> tasks_;
  lanes::LaneGroup group_;
  Result prepared_;
  std::vector<executor::LaneBeacon> beacons_;
  uint32_t abort_ = 0;
  std::vector<std::thread> blocks_;
  std::vector<executor::ExecStatus> statuses_;
};

// Polls until the watch ends or `limit` passes; how long it took.
// The rank's BRAID_TIMEOUT in the tests that a lost peer or a notice must end
// first, and the most they may take: a sixth of it. The watch looks every few
// milliseconds (peers every 100 ms), so the ending takes well under a second
// on a quiet machine; the limit is not a speed target but room for a loaded
// one, still far from the timeout that the ending must not wait for.
constexpr double kLongTimeout = 60;
constexpr auto kEndsLongBeforeTheTimeout = std::chrono::seconds(10);

double pollUntilEnd(lanes::BeaconWatch& w, std::chrono::milliseconds limit) {
  const auto start = Clock::now();
  while (w.poll()) {
    if (Clock::now() - start > limit) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Two ranks of this process, their allreduce prepared to run as blocks.
class BeaconWatchTest : public testing::Test {
 protected:
  // Each rank's BRAID_TIMEOUT, in seconds.
  void start(double timeout0, double timeout1 = 10) {
    ASSERT_TRUE(comms.ok()) << comms.error();
    comms[0]->settings.timeoutSeconds = timeout0;
    comms[1]->settings.timeoutSeconds = timeout1;
    owned_ = std::make_unique<DeviceLikeRanks>(comms);
    ASSERT_TRUE(owned_->prepared().ok()) << owned_->prepared().message();
  }
  DeviceLikeRanks& ranks() { return *owned_; }

  // The ring: one group holding both ranks would otherwise address their
  // buffers in place (PeerAccess), with no FIFO to wait on.
  braidtest::LocalComms comms{2, {{"NCCL_ALGO", "ring"}}};

 private:
  std::unique_ptr<DeviceLikeRanks> owned_;  // before comms go
};

TEST_F(BeaconWatchTest, LanesThatCompleteEndTheWatchWithTheirResult) {
  start(10);
  if (HasFatalFailure()) return;
  DeviceLikeRanks& ranks = this->ranks();
  lanes::WatchThread thread;  // it frees each watch once it ended
  thread.add(ranks.watch({0, 1}));
  ranks.launch(0);
  ranks.launch(1);
  for (executor::ExecStatus st : ranks.join()) EXPECT_EQ(st, executor::ExecStatus::Ok);
  thread.drain();
  for (int r = 0; r < 2; ++r) {
    ncclResult_t async = ncclInternalError;
    ASSERT_EQ(ncclCommGetAsyncError(comms[r], &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess);
    for (float v : ranks.out(r)) ASSERT_EQ(v, 3.0f);
  }
  // Every lane's beacon says it ended well, at its last step.
  for (size_t i = 0; i < ranks.lanes(); ++i) {
    EXPECT_EQ(ranks.beacon(i).ended, 1u + uint64_t(executor::ExecStatus::Ok));
    EXPECT_EQ(ranks.beacon(i).step, ranks.run(i).lane->bound.steps.size());
  }
}

// A kernel queued behind other work has not started: that is no hang, and
// its time does not count against BRAID_TIMEOUT.
TEST_F(BeaconWatchTest, LanesThatHaveNotStartedAreNotTimedOut) {
  start(0.3);
  if (HasFatalFailure()) return;
  DeviceLikeRanks& ranks = this->ranks();
  auto w = ranks.watch({0});
  EXPECT_EQ(pollUntilEnd(*w, std::chrono::milliseconds(800)), -1) << "the watch ended lanes that never started";
  ranks.launch(0);
  ranks.launch(1);
  for (executor::ExecStatus st : ranks.join()) EXPECT_EQ(st, executor::ExecStatus::Ok);
  EXPECT_GE(pollUntilEnd(*w, std::chrono::seconds(5)), 0);
  EXPECT_TRUE(w->result().ok()) << w->result().message();
}

// Rank 1 never launches: rank 0's lanes time out at BRAID_TIMEOUT, counted
// from their start, with the host runner's diagnosis; the abort word ends
// them and the communicator reports the error.
TEST_F(BeaconWatchTest, ATimeoutEndsTheLanesAndNamesTheRankWaitedFor) {
  start(1);
  if (HasFatalFailure()) return;
  DeviceLikeRanks& ranks = this->ranks();
  auto w = ranks.watch({0});
  testing::internal::CaptureStderr();
  ranks.launch(0);
  const double took = pollUntilEnd(*w, std::chrono::seconds(10));
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_GE(took, 0) << "no timeout within 10 s";
  EXPECT_GE(took, 0.9);
  for (executor::ExecStatus st : ranks.join()) EXPECT_EQ(st, executor::ExecStatus::Aborted);
  EXPECT_EQ(w->result().code(), ncclSystemError);
  EXPECT_NE(w->result().message().find("timed out (BRAID_TIMEOUT)"), std::string::npos) << w->result().message();
  EXPECT_NE(w->result().message().find("waiting for rank 1"), std::string::npos) << w->result().message();
  EXPECT_NE(err.find("braid diagnosis: rank 0 of 2"), std::string::npos) << err;
  EXPECT_NE(err.find("waits for data from rank 1"), std::string::npos) << err;
  EXPECT_NE(err.find("braid timeout summary (rank 0"), std::string::npos) << err;
  ncclResult_t async = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclSystemError);
  EXPECT_NE(std::string(ncclGetLastError(comms[0])).find("timed out (BRAID_TIMEOUT)"), std::string::npos)
      << "ncclGetLastError after ncclCommGetAsyncError: " << ncclGetLastError(comms[0]);
}

// The watch of one launch of a CUDA graph (WatchedReplay): `ended` runs once,
// when its lanes end.
TEST_F(BeaconWatchTest, AGraphLaunchsWatchRunsEndedOnce) {
  start(10);
  if (HasFatalFailure()) return;
  DeviceLikeRanks& ranks = this->ranks();
  std::atomic<int> ended{0};
  lanes::WatchedReplay replay;
  replay.current = [] { return true; };
  replay.ended = [&ended] { ++ended; };
  auto w = ranks.watch({0, 1}, replay);
  ranks.launch(0);
  ranks.launch(1);
  for (executor::ExecStatus st : ranks.join()) EXPECT_EQ(st, executor::ExecStatus::Ok);
  EXPECT_GE(pollUntilEnd(*w, std::chrono::seconds(5)), 0);
  EXPECT_EQ(ended.load(), 1);
  EXPECT_FALSE(w->poll());
  EXPECT_EQ(ended.load(), 1) << "ended ran twice";
}

// Once a later launch of the graph has taken the beacons over, the watch of
// the launch before ends at once and reports nothing, not even the timeout
// it would find now (what it reads are the later launch's lanes, its own
// watch's to judge): no abort, no error, no `ended`.
TEST_F(BeaconWatchTest, AGraphLaunchsWatchYieldsToTheNextLaunch) {
  start(0.3);
  if (HasFatalFailure()) return;
  DeviceLikeRanks& ranks = this->ranks();
  std::atomic<int> current{1}, ended{0};
  lanes::WatchedReplay replay;
  replay.current = [&current] { return current.load() == 1; };
  replay.ended = [&ended] { ++ended; };
  auto w = ranks.watch({0}, replay);
  ranks.launch(0);  // its peer never launches
  EXPECT_TRUE(w->poll());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // past rank 0's timeout
  current = 2;
  EXPECT_FALSE(w->poll());
  EXPECT_TRUE(w->result().ok()) << w->result().message();
  EXPECT_EQ(ended.load(), 0);
  EXPECT_FALSE(ranks.aborted()) << "a watch no longer current stopped the lanes";
  ncclResult_t async = ncclInternalError;
  ASSERT_EQ(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
}

// Another rank's failure notice ends a waiting lane within moments, not at
// the timeout, and names that rank's failure.
TEST_F(BeaconWatchTest, AFailureNoticeEndsTheLanesAtOnce) {
  start(kLongTimeout);
  if (HasFatalFailure()) return;
  DeviceLikeRanks& ranks = this->ranks();
  auto w = ranks.watch({0});
  ranks.launch(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  comms[1]->bootstrap->notifyFailure("rank 1: its GPU fell off the bus (test)", -1,
                                     Clock::now() + std::chrono::seconds(1));
  ASSERT_GE(pollUntilEnd(*w, kEndsLongBeforeTheTimeout), 0) << "the notice did not end the watch";
  for (executor::ExecStatus st : ranks.join()) EXPECT_EQ(st, executor::ExecStatus::Aborted);
  EXPECT_NE(w->result().message().find("its GPU fell off the bus"), std::string::npos) << w->result().message();
  EXPECT_NE(w->result().message().find("rank 1"), std::string::npos) << w->result().message();
}

// Rank 1's messages are of another call: the lane that receives one ends
// with a fingerprint mismatch, its watch reports it, tells rank 1, and both
// ranks' watches end with ncclInvalidUsage, no rank waiting for its timeout.
TEST_F(BeaconWatchTest, ALaneFailureOnTheDeviceIsReportedAndTold) {
  start(60, 60);
  if (HasFatalFailure()) return;
  DeviceLikeRanks& ranks = this->ranks();
  ranks.changeFingerprintOf(1);
  lanes::WatchThread thread;
  thread.add(ranks.watch({0}));
  thread.add(ranks.watch({1}));
  const auto start = Clock::now();
  ranks.launch(0);
  ranks.launch(1);
  ranks.join();
  thread.drain();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
  for (int r = 0; r < 2; ++r) {
    ncclResult_t async = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comms[r], &async), ncclSuccess);
    EXPECT_EQ(async, ncclInvalidUsage) << r << ": " << comms[r]->failureText();
    EXPECT_NE(comms[r]->failureText().find("AllReduce"), std::string::npos) << comms[r]->failureText();
  }
}

// Rank 1's process is gone (a child that exited stands in for it): a lane
// that still polls for rank 1's message fails the launch with the lost rank
// named, within moments, and the other ranks are told.
pid_t exitedProcess() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

void makeRankGone(ncclComm* comm, int rank) {
  PeerInfo& peer = comm->peers[size_t(rank)];
  peer.pid = exitedProcess();
  peer.processId ^= 0x1234567u;
  peer.startTime = 0;
}

TEST_F(BeaconWatchTest, ALostPeerEndsTheLanesThatPollForIt) {
  start(kLongTimeout);
  if (HasFatalFailure()) return;
  DeviceLikeRanks& ranks = this->ranks();
  makeRankGone(comms[0], 1);
  auto w = ranks.watch({0});
  ranks.launch(0);
  ASSERT_GE(pollUntilEnd(*w, kEndsLongBeforeTheTimeout), 0) << "the lost peer was not noticed";
  for (executor::ExecStatus st : ranks.join()) EXPECT_EQ(st, executor::ExecStatus::Aborted);
  EXPECT_EQ(w->result().code(), ncclRemoteError) << w->result().message();
  EXPECT_NE(w->result().message().find("rank 1 (pid"), std::string::npos) << w->result().message();
  EXPECT_NE(w->result().message().find("exited or was killed"), std::string::npos) << w->result().message();
}

// The beacon says where a lane waits, but not whether the message has come
// since (the lane may be computing with it): only a beacon that keeps
// beating at the same place means that the lane still polls. A still beacon
// is never taken for a lane stuck on the lost peer; a beating one is.
TEST_F(BeaconWatchTest, OnlyABeatingBeaconCountsAsWaitingOnALostPeer) {
  start(60);
  if (HasFatalFailure()) return;
  DeviceLikeRanks& ranks = this->ranks();
  makeRankGone(comms[0], 1);
  // Rank 0's first lane, at its first step that receives from rank 1.
  const lanes::LaneRun& run = ranks.run(0);
  ASSERT_EQ(run.owner->comm, comms[0]);
  size_t at = 0;
  while (at < run.lane->bound.steps.size() && run.lane->bound.steps[at].recvPort < 0) ++at;
  ASSERT_LT(at, run.lane->bound.steps.size());
  const int32_t port = run.lane->bound.steps[at].recvPort;
  ASSERT_EQ(run.lane->bound.recvPeers[size_t(port)], 1);
  executor::LaneBeacon& b = ranks.beacon(0);
  b.step = at;
  b.waitingOn = executor::waitWord(false, port, 1);
  b.beats = 1;
  auto w = ranks.watch({0});
  EXPECT_EQ(pollUntilEnd(*w, std::chrono::milliseconds(500)), -1) << w->result().message();
  EXPECT_TRUE(w->result().ok());
  const auto start = Clock::now();
  bool ended = false;
  while (!ended && Clock::now() - start < std::chrono::seconds(5)) {
    __atomic_add_fetch(&b.beats, 1, __ATOMIC_RELAXED);
    ended = !w->poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(ended);
  EXPECT_EQ(w->result().code(), ncclRemoteError) << w->result().message();
  b.ended = 1 + uint64_t(executor::ExecStatus::Aborted);  // as the lane would, after the abort word
}

// A watch that ends once its flag is set, counting its polls.
class FlagWatch : public lanes::Watch {
 public:
  FlagWatch(std::atomic<bool>* done, std::atomic<int>* polls) : done_(done), polls_(polls) {}
  bool poll() override {
    polls_->fetch_add(1);
    return !done_->load();
  }

 private:
  std::atomic<bool>* done_;
  std::atomic<int>* polls_;
};

// The thread polls a watch added while it polls others (it does not wake for
// it: it takes it at its next look) and one added once it went idle (woken
// for it): each is polled and ended, none waits for another add.
TEST(WatchThread, TakesWatchesAddedWhilePollingAndWhileIdle) {
  lanes::WatchThread thread;
  std::atomic<bool> firstDone{false}, secondDone{false}, thirdDone{true};
  std::atomic<int> firstPolls{0}, secondPolls{0}, thirdPolls{0};
  thread.add(std::make_unique<FlagWatch>(&firstDone, &firstPolls));
  while (firstPolls.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  thread.add(std::make_unique<FlagWatch>(&secondDone, &secondPolls));  // the thread is polling
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (secondPolls.load() == 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_GT(secondPolls.load(), 0) << "a watch added while the thread polled was never polled";
  firstDone = true;
  secondDone = true;
  thread.drain();  // both ended: after its next look (kLookEvery, 2 ms) the thread waits, idle
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  thread.add(std::make_unique<FlagWatch>(&thirdDone, &thirdPolls));
  while (thirdPolls.load() == 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(thirdPolls.load(), 1) << "a watch added to the idle thread was not polled";
  if (thirdPolls.load() == 1) thread.drain();  // else destruction stops the thread
}

}  // namespace
}  // namespace braid
