// Runs P NCCL ranks as threads of the test process, so they talk through
// braid's in-process transport (real plans, real FIFOs in heap memory).
//
//   threadtest::runThreadRanks(8, [](ncclComm_t comm, int rank, int nranks) {
//     ...
//     TR_EXPECT(got == want, "element %zu: got %d want %d", i, got, want);
//   });
//
// Contract:
//  - The calling (GoogleTest) thread applies ThreadOptions::env with setenv,
//    makes the unique id with ncclGetUniqueId, starts one std::thread per rank
//    and, once every rank is done, restores the environment. The library reads
//    its settings (NCCL_ALGO, NCCL_BUFFSIZE, ...) in ncclCommInitRank, which
//    each rank thread calls with that id; no thread touches the environment
//    while ranks run.
//  - A rank calls ncclCommInitRank, runs the body, then ncclCommDestroy.
//    TR_EXPECT records a failure and goes on (the rank stays in step with its
//    peers); TR_CHECK / TR_NCCL_CHECK record one and leave the body (the rank
//    skips ncclCommDestroy: its peers may still be using the communicator).
//  - Failures are collected per rank and reported by the calling thread as one
//    GoogleTest failure naming each rank and its messages.
//  - Threads cannot be killed, so a hang is ended by the calling thread: when a
//    rank has not finished by the deadline (timeoutSeconds, or failGraceSeconds
//    after a rank left with a fatal failure), it prints the report, naming the
//    unfinished ranks and the last step each announced with progress(), and
//    calls abort(). CTest then records the test as failed instead of blocking.
#ifndef BRAID_TESTS_THREADS_THREAD_RANKS_H_
#define BRAID_TESTS_THREADS_THREAD_RANKS_H_

#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/scoped_env.h"

namespace threadtest {

struct ThreadOptions {
  std::vector<std::pair<std::string, std::string>> env;  // set around the run
  int timeoutSeconds = 120;
  int failGraceSeconds = 10;
};

using ThreadBody = std::function<void(ncclComm_t comm, int rank, int nranks)>;

namespace detail {

constexpr int kMaxMessagesPerRank = 20;

enum class RankState { kRunning, kDone, kFatal };

struct RankRecord {
  RankState state = RankState::kRunning;
  std::string step;
  std::vector<std::string> messages;
  int dropped = 0;
};

// What the rank threads share with the calling thread; all under `mu`.
struct Run {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<RankRecord> ranks;
  int unfinished = 0;
  bool anyFatal = false;
};

// The run and rank of the calling thread; null outside rank threads.
struct Current {
  Run* run = nullptr;
  int rank = -1;
};
inline Current& current() {
  thread_local Current c;
  return c;
}

// Thrown by TR_CHECK to leave the body.
struct RankAbort {};

inline void record(const std::string& text) {
  Current& c = current();
  if (!c.run) {
    ADD_FAILURE() << text;
    return;
  }
  std::fprintf(stderr, "[thread rank %d] %s\n", c.rank, text.c_str());
  std::lock_guard<std::mutex> lock(c.run->mu);
  RankRecord& r = c.run->ranks[c.rank];
  if (static_cast<int>(r.messages.size()) < kMaxMessagesPerRank)
    r.messages.push_back(text);
  else
    r.dropped++;
}

inline std::string vformat(const char* fmt, va_list ap) {
  char text[2048];
  std::vsnprintf(text, sizeof(text), fmt, ap);
  return text;
}

inline void finish(Run& run, int rank, RankState state) {
  std::lock_guard<std::mutex> lock(run.mu);
  run.ranks[rank].state = state;
  run.unfinished--;
  if (state == RankState::kFatal) run.anyFatal = true;
  run.cv.notify_all();
}

inline void rankMain(Run& run, int rank, int nranks, const ncclUniqueId& id, const ThreadBody& body) {
  current() = Current{&run, rank};
  {
    std::lock_guard<std::mutex> lock(run.mu);
    run.ranks[rank].step = "ncclCommInitRank";
  }
  ncclComm_t comm = nullptr;
  const ncclResult_t init = ncclCommInitRank(&comm, nranks, id, rank);
  if (init != ncclSuccess) {
    record(std::string("ncclCommInitRank failed: ") + ncclGetErrorString(init) + " (" +
           ncclGetLastError(nullptr) + ")");
    finish(run, rank, RankState::kFatal);
    return;
  }
  bool fatal = false;
  try {
    body(comm, rank, nranks);
  } catch (const RankAbort&) {
    fatal = true;
  } catch (const std::exception& e) {
    record(std::string("uncaught exception: ") + e.what());
    fatal = true;
  } catch (...) {
    record("uncaught non-standard exception");
    fatal = true;
  }
  if (!fatal) {
    {
      std::lock_guard<std::mutex> lock(run.mu);
      run.ranks[rank].step = "ncclCommDestroy";
    }
    const ncclResult_t d = ncclCommDestroy(comm);
    if (d != ncclSuccess) record(std::string("ncclCommDestroy failed: ") + ncclGetErrorString(d));
  }
  finish(run, rank, fatal ? RankState::kFatal : RankState::kDone);
}

// Caller holds run.mu.
inline std::string summary(const Run& run, double seconds, bool hung) {
  std::string s;
  char head[160];
  std::snprintf(head, sizeof(head), "%zu thread ranks, %.1f s%s:\n", run.ranks.size(), seconds,
                hung ? ", NOT ALL FINISHED" : "");
  s += head;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    const RankRecord& rec = run.ranks[r];
    const bool failed = rec.state != RankState::kDone || !rec.messages.empty();
    if (!failed) continue;
    s += "  rank " + std::to_string(r) + ": ";
    if (rec.state == RankState::kRunning) s += "HUNG, last step: " + rec.step;
    else if (rec.state == RankState::kFatal) s += "stopped by a fatal failure, last step: " + rec.step;
    else s += "finished with failures";
    s += "\n";
    for (const auto& m : rec.messages) s += "    " + m + "\n";
    if (rec.dropped) s += "    [" + std::to_string(rec.dropped) + " more messages on stderr]\n";
  }
  return s;
}

}  // namespace detail

// Announce what this rank is about to do; a hung rank's report shows it.
inline void progress(const std::string& step) {
  detail::Current& c = detail::current();
  if (!c.run) return;
  std::lock_guard<std::mutex> lock(c.run->mu);
  c.run->ranks[c.rank].step = step;
}

// Record a failure of this rank and go on.
inline void fail(const std::string& text) { detail::record(text); }

inline void expectFailed(const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const std::string body = detail::vformat(fmt, ap);
  va_end(ap);
  detail::record(std::string(file) + ":" + std::to_string(line) + ": " + body);
}

[[noreturn]] inline void checkFailed(const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const std::string body = detail::vformat(fmt, ap);
  va_end(ap);
  detail::record(std::string(file) + ":" + std::to_string(line) + ": " + body);
  throw detail::RankAbort{};
}

// Leave the body without another message (after enough were recorded).
[[noreturn]] inline void stopRank() { throw detail::RankAbort{}; }

inline void runThreadRanks(int nranks, const ThreadBody& body, const ThreadOptions& opts = {}) {
  using Clock = std::chrono::steady_clock;
  ASSERT_GE(nranks, 1);
  braidtest::ScopedEnv env(opts.env);
  ncclUniqueId id;
  const ncclResult_t idRes = ncclGetUniqueId(&id);
  ASSERT_EQ(idRes, ncclSuccess) << "ncclGetUniqueId: " << ncclGetErrorString(idRes) << " ("
                                << ncclGetLastError(nullptr) << ")";

  detail::Run run;
  run.ranks.resize(nranks);
  run.unfinished = nranks;
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  threads.reserve(nranks);
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&run, r, nranks, id, &body] { detail::rankMain(run, r, nranks, id, body); });

  std::unique_lock<std::mutex> lock(run.mu);
  const auto deadline = start + std::chrono::seconds(opts.timeoutSeconds);
  auto graceDeadline = Clock::time_point::max();
  while (run.unfinished > 0) {
    if (run.anyFatal && graceDeadline == Clock::time_point::max())
      graceDeadline = Clock::now() + std::chrono::seconds(opts.failGraceSeconds);
    const auto until = std::min(deadline, graceDeadline);
    if (run.cv.wait_until(lock, until) == std::cv_status::timeout && Clock::now() >= until &&
        run.unfinished > 0) {
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      std::fprintf(stderr,
                   "\nthreadtest: %d of %d rank threads did not finish %s; threads cannot be "
                   "killed, so the test process aborts.\n%s\n",
                   run.unfinished, nranks,
                   until == deadline ? ("within the timeout of " + std::to_string(opts.timeoutSeconds) + " s").c_str()
                                     : "after a rank failed",
                   detail::summary(run, s, true).c_str());
      std::fflush(stderr);
      std::abort();
    }
  }
  lock.unlock();
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  bool failed = false;
  for (const auto& rec : run.ranks)
    failed = failed || rec.state != detail::RankState::kDone || !rec.messages.empty();
  if (failed) ADD_FAILURE() << detail::summary(run, seconds, false);
}

}  // namespace threadtest

#define TR_EXPECT(cond, ...)                                                                       \
  do {                                                                                             \
    if (!(cond)) ::threadtest::expectFailed(__FILE__, __LINE__, "expectation failed: " #cond "; " __VA_ARGS__); \
  } while (0)

#define TR_CHECK(cond, ...)                                                                       \
  do {                                                                                            \
    if (!(cond)) ::threadtest::checkFailed(__FILE__, __LINE__, "check failed: " #cond "; " __VA_ARGS__); \
  } while (0)

#define TR_NCCL_CHECK(call)                                                                       \
  do {                                                                                            \
    const ncclResult_t tr_res_ = (call);                                                          \
    if (tr_res_ != ncclSuccess)                                                                   \
      ::threadtest::checkFailed(__FILE__, __LINE__, "%s returned %d (%s); ncclGetLastError: %s", \
                                #call, static_cast<int>(tr_res_), ncclGetErrorString(tr_res_),   \
                                ncclGetLastError(nullptr));                                      \
  } while (0)

#endif  // BRAID_TESTS_THREADS_THREAD_RANKS_H_
