// Soak: many small allreduces and many communicator create/destroy cycles on
// two forked ranks over the real shm and TCP transports, with each rank
// checking that its memory, descriptors, threads and shared-memory segments do
// not grow between a sample after warm-up and one at the end. And: a rank
// SIGKILLed in the middle of a collective leaves no segment in /dev/shm once
// the others are gone.
//
// Counts can be raised for a longer soak: BRAID_SOAK_CALLS_SHM,
// BRAID_SOAK_CALLS_TCP, BRAID_SOAK_CYCLES_SHM, BRAID_SOAK_CYCLES_TCP.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "common/mp_harness.h"
#include "common/shared_page.h"
#include "resources.h"

namespace {

long countFromEnv(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atol(v) : fallback;
}

// State the forked ranks share with each other and with the test process.
struct Shared {
  std::atomic<int> pid[2];
  std::atomic<long> idSeq;  // cycle whose id is in `id`
  ncclUniqueId id;
};

using SharedPage = testshm::SharedPage<Shared>;

std::vector<std::pair<std::string, std::string>> transportEnv(bool tcp) {
  return {{"NCCL_SHM_DISABLE", tcp ? "1" : "0"}};
}

void expectNoGrowth(int rank, const soak::Usage& base, const soak::Slack& slack, const char* what) {
  const soak::Usage end = soak::settledSample(base, slack);
  std::printf("rank %d, %s:\n  after warm-up: %s\n  at the end:    %s\n", rank, what,
              base.str().c_str(), end.str().c_str());
  std::fflush(stdout);
  const std::string why = soak::growth(base, end, slack);
  MP_EXPECT(why.empty(), "rank %d, %s: %s\n  after warm-up: %s\n  at the end:    %s", rank, what,
            why.c_str(), base.str().c_str(), end.str().c_str());
}

// ---- the measurement itself ----

// Every kind of growth the soak tests look for is seen by the sampler.
TEST(SoakProbe, SeesEveryKindOfGrowth) {
  const soak::Slack slack;
  const soak::Usage base = soak::sample();
  const size_t big = 8u << 20;  // beyond both the RSS and the heap slack
  std::unique_ptr<char[]> heap(new char[big]);
  std::memset(heap.get(), 1, big);
  const int fd = dup(0);
  std::promise<void> release;
  std::thread parked([f = release.get_future()]() mutable { f.wait(); });
  const std::string name = "/braid-" + std::to_string(getpid()) + "-soakprobe";
  const int shm = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  const soak::Usage now = soak::sample();
  const std::string why = soak::growth(base, now, slack);
  if (shm >= 0) {
    close(shm);
    shm_unlink(name.c_str());
  }
  release.set_value();
  parked.join();
  if (fd >= 0) close(fd);
  ASSERT_GE(fd, 0);
  ASSERT_GE(shm, 0) << "cannot create " << name << ": " << strerror(errno);
  for (const char* what : {"RSS KiB", "heap bytes", "open fds", "threads", "shm segments"})
    EXPECT_NE(why.find(what), std::string::npos) << what << " growth not seen: " << why;
  EXPECT_EQ(soak::growth(base, base, slack), "");
}

// ---- many small allreduces on one communicator ----

constexpr size_t kSmallCount = 16;  // 64 bytes of floats

void allReduceOnce(ncclComm_t comm, int rank, long iter, std::vector<float>* in,
                   std::vector<float>* out) {
  for (size_t i = 0; i < kSmallCount; ++i) (*in)[i] = static_cast<float>(rank + (iter + i) % 1000);
  MP_NCCL_CHECK(ncclAllReduce(in->data(), out->data(), kSmallCount, ncclFloat, ncclSum, comm, nullptr));
  for (size_t i = 0; i < kSmallCount; ++i) {
    const float want = static_cast<float>(1 + 2 * ((iter + i) % 1000));
    MP_CHECK((*out)[i] == want, "allreduce #%ld element %zu: got %g want %g", iter, i, (*out)[i], want);
  }
}

void manyAllReduces(int rank, const ncclUniqueId& id, long calls) {
  ncclComm_t comm;
  MP_NCCL_CHECK(ncclCommInitRank(&comm, 2, id, rank));
  std::vector<float> in(kSmallCount), out(kSmallCount);
  const long warmup = std::min(calls / 10, 1000L);
  long iter = 0;
  for (; iter < warmup; ++iter) allReduceOnce(comm, rank, iter, &in, &out);
  const soak::Usage base = soak::sample();
  for (; iter < calls; ++iter) {
    if (iter % 10000 == 0) mptest::progress("allreduce #%ld", iter);
    allReduceOnce(comm, rank, iter, &in, &out);
  }
  soak::Slack slack;
  expectNoGrowth(rank, base, slack, "small allreduces");
  MP_NCCL_CHECK(ncclCommDestroy(comm));
}

void runManyAllReduces(bool tcp, long calls) {
  mptest::RankOptions opts;
  opts.env = transportEnv(tcp);
  opts.timeoutSeconds = 240;
  const auto t0 = std::chrono::steady_clock::now();
  mptest::runRanks(2, [calls](int rank, int, const ncclUniqueId& id) { manyAllReduces(rank, id, calls); },
                   opts);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%ld allreduces of %zu floats over %s: %.2f s (%.1f us each)\n", calls, kSmallCount,
              tcp ? "tcp" : "shm", s, s * 1e6 / static_cast<double>(calls));
}

TEST(Soak, SmallAllReducesShm) { runManyAllReduces(false, countFromEnv("BRAID_SOAK_CALLS_SHM", 100000)); }

// 10,000 over TCP, not 100,000: with another busy process on a 2-core machine
// (ctest -j2) a small TCP allreduce takes ~1.3 ms (~160 us when the machine
// is otherwise quiet, ~9 us when idle), so 100,000 would take minutes.
TEST(Soak, SmallAllReducesTcp) { runManyAllReduces(true, countFromEnv("BRAID_SOAK_CALLS_TCP", 10000)); }

// ---- many communicators, one after another ----

// Rank 0 makes the id of every cycle; rank 1 takes it from the shared page.
ncclUniqueId idForCycle(Shared* s, int rank, long cycle) {
  if (rank == 0) {
    MP_NCCL_CHECK(ncclGetUniqueId(&s->id));
    s->idSeq.store(cycle, std::memory_order_release);
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (s->idSeq.load(std::memory_order_acquire) != cycle) {
      MP_CHECK(std::chrono::steady_clock::now() < deadline, "no unique id for cycle %ld", cycle);
      std::this_thread::yield();
    }
  }
  // Rank 0 writes the next id only after this cycle's init, which needs rank 1.
  return s->id;
}

void oneCycle(Shared* s, int rank, long cycle) {
  const ncclUniqueId id = idForCycle(s, rank, cycle);
  ncclComm_t comm;
  MP_NCCL_CHECK(ncclCommInitRank(&comm, 2, id, rank));
  // One collective so that the transport connections are made and torn down too.
  int in = rank + 1, out = 0;
  MP_NCCL_CHECK(ncclAllReduce(&in, &out, 1, ncclInt, ncclSum, comm, nullptr));
  MP_CHECK(out == 3, "cycle %ld: allreduce gave %d", cycle, out);
  MP_NCCL_CHECK(ncclCommDestroy(comm));
}

void runCycles(bool tcp, long cycles) {
  SharedPage page;
  ASSERT_NE(page.get(), nullptr);
  Shared* s = page.get();
  s->idSeq.store(-1);
  mptest::RankOptions opts;
  opts.env = transportEnv(tcp);
  opts.timeoutSeconds = 240;
  opts.idSource = mptest::IdSource::None;
  const auto t0 = std::chrono::steady_clock::now();
  mptest::runRanks(2, [s, cycles](int rank, int, const ncclUniqueId&) {
    const long warmup = std::min(cycles / 10, 20L);
    long cycle = 0;
    for (; cycle < warmup; ++cycle) oneCycle(s, rank, cycle);
    const soak::Usage base = soak::settledSample(soak::sample(), soak::Slack());
    for (; cycle < cycles; ++cycle) {
      if (cycle % 100 == 0) mptest::progress("cycle %ld", cycle);
      oneCycle(s, rank, cycle);
    }
    expectNoGrowth(rank, base, soak::Slack(), "create/destroy cycles");
  }, opts);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%ld communicator create/allreduce/destroy cycles over %s: %.2f s (%.2f ms each)\n",
              cycles, tcp ? "tcp" : "shm", sec, sec * 1e3 / static_cast<double>(cycles));
}

TEST(Soak, CommCreateDestroyCyclesShm) { runCycles(false, countFromEnv("BRAID_SOAK_CYCLES_SHM", 1000)); }

TEST(Soak, CommCreateDestroyCyclesTcp) { runCycles(true, countFromEnv("BRAID_SOAK_CYCLES_TCP", 1000)); }

// ---- a rank killed mid-collective ----

// Shared memory only; survivors may block until braid notices the loss (at
// BRAID_TIMEOUT at the latest); past the grace the harness kills them.
mptest::RankOptions killedRankOptions() {
  mptest::RankOptions opts;
  opts.env = transportEnv(false);
  opts.env.push_back({"BRAID_TIMEOUT", "5"});
  opts.failGraceSeconds = 15;
  opts.timeoutSeconds = 60;
  return opts;
}

// No braid segment of the job's processes may remain; any found is removed,
// so that a failing run does not leave them to the machine.
void expectNoSegmentsLeft(const std::vector<pid_t>& pids, const mptest::RunReport& report) {
  const std::vector<std::string> left = soak::shmSegments(pids);
  std::string names;
  for (const auto& n : left) names += " /dev/shm/" + n;
  for (const auto& n : left) shm_unlink(("/" + n).c_str());
  EXPECT_TRUE(left.empty()) << left.size() << " braid segment(s) of the job left behind:" << names
                            << "\n" << report.summary();
}

TEST(Soak, RankKilledMidCollectiveLeavesNoShmSegment) {
  SharedPage page;
  ASSERT_NE(page.get(), nullptr);
  Shared* s = page.get();
  const mptest::RankOptions opts = killedRankOptions();
  constexpr int kRanks = 3;
  std::vector<pid_t> pids(kRanks);
  std::atomic<int>* pidSlots = s->pid;  // ranks 0 and 1; rank 2's pid travels in idSeq
  const mptest::RunReport report = mptest::runRanksReport(kRanks, [s, pidSlots](int rank, int nranks, const ncclUniqueId& id) {
    if (rank < 2) pidSlots[rank].store(getpid());
    else s->idSeq.store(getpid());
    ncclComm_t comm;
    MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
    // Large enough that each call spends its time moving data through the FIFOs.
    const size_t count = 1 << 20;
    std::vector<float> in(count, 1.0f), out(count);
    MP_NCCL_CHECK(ncclAllReduce(in.data(), out.data(), count, ncclFloat, ncclSum, comm, nullptr));
    if (rank == 1) {
      // Die from another thread at a moment the main thread does not choose.
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        kill(getpid(), SIGKILL);
      }).detach();
    }
    for (int iter = 0; iter < 100000; ++iter) {
      mptest::progress("allreduce %d", iter);
      const ncclResult_t r = ncclAllReduce(in.data(), out.data(), count, ncclFloat, ncclSum, comm, nullptr);
      if (r != ncclSuccess) break;  // any error is fine: a peer is gone
    }
    // A survivor leaves without waiting on the dead peer.
    (void)ncclCommAbort(comm);
  }, opts);

  ASSERT_TRUE(report.setupError.empty()) << report.setupError;
  ASSERT_EQ(report.ranks.size(), static_cast<size_t>(kRanks));
  EXPECT_EQ(report.ranks[1].kind, mptest::RankOutcome::kCrashed) << report.summary();
  EXPECT_EQ(report.ranks[1].detail, SIGKILL) << report.summary();
  for (int r : {0, 2})
    std::printf("survivor rank %d: %s\n", r,
                report.ranks[r].kind == mptest::RankOutcome::kOk ? "returned an error and left"
                : report.ranks[r].kind == mptest::RankOutcome::kKilledAfterPeerFailure
                    ? "still blocked at the grace deadline, killed by the harness"
                    : "failed otherwise (see the summary)");
  pids = {s->pid[0].load(), s->pid[1].load(), static_cast<pid_t>(s->idSeq.load())};
  expectNoSegmentsLeft(pids, report);
}

// A rank killed while it sets up its shared-memory FIFOs: its segment exists
// in /dev/shm but the receiving side (its creator) has not returned from
// accept(), which is where the name is removed. Rank 1 watches /dev/shm from a
// thread and dies the moment its first segment appears.
//
// Rank 0 starts its collectives late, so that rank 1's segment waits in
// /dev/shm long enough for the watcher to see it (unwaited, a fast accept
// removes the name within microseconds and the watcher may miss it). The
// survivor removes a dead creator's segments (Transport::cleanUpAfterDeadPeers);
// the test removes what it finds, so a failure leaves nothing behind.
TEST(Soak, RankKilledWhileConnectingLeavesNoShmSegment) {
  SharedPage page;
  ASSERT_NE(page.get(), nullptr);
  Shared* s = page.get();
  const mptest::RankOptions opts = killedRankOptions();
  const mptest::RunReport report = mptest::runRanksReport(2, [s](int rank, int nranks, const ncclUniqueId& id) {
    s->pid[rank].store(getpid());
    ncclComm_t comm;
    MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
    if (rank == 1) {
      std::thread([] {
        for (;;) {
          if (!soak::shmSegments({getpid()}).empty()) kill(getpid(), SIGKILL);
          std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
      }).detach();
    }
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::vector<float> in(1024, 1.0f), out(1024);
    for (int iter = 0; iter < 1000; ++iter) {
      mptest::progress("allreduce %d", iter);
      if (ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat, ncclSum, comm, nullptr) != ncclSuccess)
        break;
    }
    (void)ncclCommAbort(comm);
  }, opts);
  ASSERT_TRUE(report.setupError.empty()) << report.setupError;
  EXPECT_EQ(report.ranks[1].kind, mptest::RankOutcome::kCrashed) << report.summary();
  expectNoSegmentsLeft({s->pid[0].load(), s->pid[1].load()}, report);
}

}  // namespace
