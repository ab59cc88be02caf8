// A small harness that runs N NCCL ranks as forked processes inside one
// GoogleTest case.
//
//   mptest::runRanks(4, [](int rank, int nranks, const ncclUniqueId& id) {
//     ncclComm_t comm;
//     MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
//     ...
//     MP_EXPECT(got == want, "element %zu: got %d want %d", i, got, want);
//   }, opts);
//
// Contract:
//  - Every rank is a child process forked by the test process. A child sets
//    the environment variables of RankOptions::env before any NCCL call, runs
//    the body and leaves with _exit: 0 when the body returned and no
//    MP_EXPECT failed, 1 otherwise. Children never return into GoogleTest.
//  - The unique id is made by rank 0's child after it applied the
//    environment (IdSource::Rank0, the default: the way real jobs do it, and
//    the test process itself never loads NCCL state that a fork would copy,
//    such as environment variables already read), or by the test process
//    before forking (IdSource::Parent), or not at all (IdSource::None, for
//    bodies that do not call NCCL).
//  - The parent waits for all children up to RankOptions::timeoutSeconds.
//    When a rank fails, the others get failGraceSeconds to finish before they
//    are killed (a failed rank usually leaves its peers blocked). Stragglers
//    are killed with SIGKILL. The report names every rank that failed, crashed
//    or hung, with its messages and, for a hung rank, the last step it
//    announced with mptest::progress().
//  - Failure text goes to stderr and to a page shared with the parent, so it
//    appears in the GoogleTest failure message.
#ifndef BRAID_TESTS_COMMON_MP_HARNESS_H_
#define BRAID_TESTS_COMMON_MP_HARNESS_H_

#include <gtest/gtest.h>
#include <nccl.h>

#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace mptest {

enum class IdSource { Rank0, Parent, None };

struct RankOptions {
  std::vector<std::pair<std::string, std::string>> env;  // set in each child
  int timeoutSeconds = 120;
  int failGraceSeconds = 10;
  IdSource idSource = IdSource::Rank0;
};

using RankBody = std::function<void(int rank, int nranks, const ncclUniqueId& id)>;

struct RankOutcome {
  enum Kind { kOk, kFailed, kCrashed, kTimedOut, kKilledAfterPeerFailure };
  int rank = 0;
  Kind kind = kOk;
  int detail = 0;  // exit code or signal number
  std::string messages;
  std::string lastStep;
};

struct RunReport {
  std::vector<RankOutcome> ranks;
  double seconds = 0;
  std::string setupError;  // the harness itself could not start the ranks

  bool ok() const {
    if (!setupError.empty()) return false;
    for (const auto& r : ranks)
      if (r.kind != RankOutcome::kOk) return false;
    return true;
  }
  std::string summary() const;
};

namespace detail {

constexpr size_t kMessageBytes = 6000;
constexpr size_t kStepBytes = 400;

struct RankSlot {
  char step[kStepBytes];
  char messages[kMessageBytes];
  std::atomic<size_t> used;
};

struct SharedPage {
  std::atomic<int> idState;  // 0 not yet, 1 ready, -1 rank 0 could not make it
  ncclUniqueId id;
  RankSlot slots[1];  // nranks of them
};

inline size_t sharedBytes(int nranks) {
  return sizeof(SharedPage) + sizeof(RankSlot) * static_cast<size_t>(nranks > 1 ? nranks - 1 : 0);
}

// State of the current child process; null in the test process.
struct ChildState {
  int rank = -1;
  RankSlot* slot = nullptr;
  bool expectFailed = false;
};
inline ChildState& child() {
  static ChildState state;
  return state;
}

// An anonymous shared mapping, unmapped when the parent is done with it.
class SharedMapping {
 public:
  explicit SharedMapping(size_t bytes) : bytes_(bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    addr_ = p == MAP_FAILED ? nullptr : p;
  }
  ~SharedMapping() {
    if (addr_) munmap(addr_, bytes_);
  }
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;
  void* get() const { return addr_; }

 private:
  void* addr_ = nullptr;
  size_t bytes_;
};

inline void appendMessage(const char* text) {
  std::fputs(text, stderr);
  std::fflush(stderr);
  RankSlot* slot = child().slot;
  if (!slot) return;
  const size_t len = std::strlen(text);
  // Whole messages only: one that does not fit is left to stderr.
  const size_t at = slot->used.fetch_add(len, std::memory_order_relaxed);
  if (at + len <= kMessageBytes - 1) std::memcpy(slot->messages + at, text, len);
}

inline void vreport(const char* file, int line, const char* fmt, va_list ap) {
  char body[2048];
  std::vsnprintf(body, sizeof(body), fmt, ap);
  char text[2600];
  std::snprintf(text, sizeof(text), "[rank %d pid %d] %s:%d: %s\n", child().rank,
                static_cast<int>(getpid()), file, line, body);
  appendMessage(text);
}

[[noreturn]] inline void childExit(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(code);
}

[[noreturn]] inline void runChild(int rank, int nranks, const RankBody& body,
                                  const RankOptions& opts, SharedPage* page,
                                  const ncclUniqueId& parentId, pid_t parentPid) {
  // Die with the test process rather than linger as an orphan.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parentPid) _exit(3);
  child().rank = rank;
  child().slot = &page->slots[rank];
  for (const auto& kv : opts.env) setenv(kv.first.c_str(), kv.second.c_str(), 1);

  ncclUniqueId id = parentId;
  if (opts.idSource == IdSource::Rank0) {
    if (rank == 0) {
      const ncclResult_t r = ncclGetUniqueId(&page->id);
      page->idState.store(r == ncclSuccess ? 1 : -1, std::memory_order_release);
      if (r != ncclSuccess) {
        char text[1200];
        std::snprintf(text, sizeof(text), "[rank 0] ncclGetUniqueId failed: %s (%s)\n",
                      ncclGetErrorString(r), ncclGetLastError(nullptr));
        appendMessage(text);
        childExit(1);
      }
    } else {
      int state;
      while ((state = page->idState.load(std::memory_order_acquire)) == 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (state < 0) {
        appendMessage("rank 0 could not make the unique id; giving up\n");
        childExit(1);
      }
    }
    id = page->id;
  }

  try {
    body(rank, nranks, id);
  } catch (const std::exception& e) {
    char text[1200];
    std::snprintf(text, sizeof(text), "[rank %d] uncaught exception: %s\n", rank, e.what());
    appendMessage(text);
    childExit(1);
  } catch (...) {
    appendMessage("uncaught non-standard exception\n");
    childExit(1);
  }
  childExit(child().expectFailed ? 1 : 0);
}

inline std::string kindName(RankOutcome::Kind k) {
  switch (k) {
    case RankOutcome::kOk: return "ok";
    case RankOutcome::kFailed: return "FAILED";
    case RankOutcome::kCrashed: return "CRASHED";
    case RankOutcome::kTimedOut: return "HUNG (killed at the timeout)";
    case RankOutcome::kKilledAfterPeerFailure: return "killed after a peer failed";
  }
  return "?";
}

}  // namespace detail

// Announce what this rank is about to do; a hung rank's report shows it.
inline void progress(const char* fmt, ...) {
  detail::RankSlot* slot = detail::child().slot;
  if (!slot) return;
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(slot->step, sizeof(slot->step), fmt, ap);
  va_end(ap);
}

// Report a failure from a child; the rank goes on and exits 1 at the end.
inline void expectFailed(const char* file, int line, const char* fmt, ...) {
  detail::child().expectFailed = true;
  va_list ap;
  va_start(ap, fmt);
  detail::vreport(file, line, fmt, ap);
  va_end(ap);
}

// Report a failure from a child and leave at once.
[[noreturn]] inline void checkFailed(const char* file, int line, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  detail::vreport(file, line, fmt, ap);
  va_end(ap);
  detail::childExit(1);
}

// Mark the rank failed without another message (after enough were printed).
inline void markFailed() { detail::child().expectFailed = true; }

inline bool childHasFailures() { return detail::child().expectFailed; }

inline std::string RunReport::summary() const {
  std::string s;
  if (!setupError.empty()) s += "harness: " + setupError + "\n";
  int bad = 0;
  for (const auto& r : ranks)
    if (r.kind != RankOutcome::kOk) bad++;
  char head[200];
  std::snprintf(head, sizeof(head), "%d of %zu ranks did not succeed (%.1f s):\n", bad,
                ranks.size(), seconds);
  s += head;
  for (const auto& r : ranks) {
    if (r.kind == RankOutcome::kOk) continue;
    char line[200];
    if (r.kind == RankOutcome::kFailed)
      std::snprintf(line, sizeof(line), "  rank %d: FAILED (exit %d)", r.rank, r.detail);
    else if (r.kind == RankOutcome::kCrashed)
      std::snprintf(line, sizeof(line), "  rank %d: CRASHED (signal %d, %s)", r.rank, r.detail,
                    strsignal(r.detail));
    else
      std::snprintf(line, sizeof(line), "  rank %d: %s", r.rank, detail::kindName(r.kind).c_str());
    s += line;
    if (!r.lastStep.empty()) s += "; last step: " + r.lastStep;
    s += "\n";
    if (!r.messages.empty()) s += r.messages;
  }
  return s;
}

// Run body on nranks forked processes and report how each one ended.
inline RunReport runRanksReport(int nranks, const RankBody& body, const RankOptions& opts = {}) {
  using Clock = std::chrono::steady_clock;
  RunReport report;
  const auto start = Clock::now();
  if (nranks < 1) {
    report.setupError = "nranks must be at least 1";
    return report;
  }
  detail::SharedMapping shared(detail::sharedBytes(nranks));
  if (!shared.get()) {
    report.setupError = std::string("mmap of the shared report page failed: ") + strerror(errno);
    return report;
  }
  auto* page = new (shared.get()) detail::SharedPage;  // zeroed by mmap
  page->idState.store(0);
  for (int r = 0; r < nranks; ++r) new (&page->slots[r].used) std::atomic<size_t>(0);

  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (opts.idSource == IdSource::Parent) {
    const ncclResult_t res = ncclGetUniqueId(&id);
    if (res != ncclSuccess) {
      report.setupError = std::string("ncclGetUniqueId failed in the test process: ") +
                          ncclGetErrorString(res) + " (" + ncclGetLastError(nullptr) + ")";
      return report;
    }
  }

  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t self = getpid();
  std::vector<pid_t> pids(nranks, -1);
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) detail::runChild(r, nranks, body, opts, page, id, self);
    if (pid < 0) {
      report.setupError = std::string("fork failed: ") + strerror(errno);
      for (int k = 0; k < r; ++k) kill(pids[k], SIGKILL);
      for (int k = 0; k < r; ++k) waitpid(pids[k], nullptr, 0);
      return report;
    }
    pids[r] = pid;
  }

  report.ranks.resize(nranks);
  std::vector<bool> done(nranks, false);
  int remaining = nranks;
  const auto deadline = start + std::chrono::seconds(opts.timeoutSeconds);
  Clock::time_point graceDeadline = Clock::time_point::max();
  while (remaining > 0) {
    bool reaped = false;
    for (int r = 0; r < nranks; ++r) {
      if (done[r]) continue;
      int status = 0;
      const pid_t w = waitpid(pids[r], &status, WNOHANG);
      if (w != pids[r]) continue;
      done[r] = true;
      remaining--;
      reaped = true;
      RankOutcome& o = report.ranks[r];
      o.rank = r;
      if (WIFEXITED(status)) {
        o.detail = WEXITSTATUS(status);
        o.kind = o.detail == 0 ? RankOutcome::kOk : RankOutcome::kFailed;
      } else {
        o.detail = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        o.kind = RankOutcome::kCrashed;
      }
      if (o.kind != RankOutcome::kOk && graceDeadline == Clock::time_point::max())
        graceDeadline = Clock::now() + std::chrono::seconds(opts.failGraceSeconds);
    }
    if (remaining == 0) break;
    const auto now = Clock::now();
    if (now >= deadline || now >= graceDeadline) {
      const auto kind = now >= graceDeadline ? RankOutcome::kKilledAfterPeerFailure
                                             : RankOutcome::kTimedOut;
      for (int r = 0; r < nranks; ++r) {
        if (done[r]) continue;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], nullptr, 0);
        done[r] = true;
        report.ranks[r].rank = r;
        report.ranks[r].kind = kind;
      }
      break;
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }

  for (int r = 0; r < nranks; ++r) {
    const detail::RankSlot& slot = page->slots[r];
    const size_t used = std::min(slot.used.load(), detail::kMessageBytes - 1);
    report.ranks[r].messages.assign(slot.messages, strnlen(slot.messages, used));
    if (slot.used.load() > used) report.ranks[r].messages += "  [... more messages on stderr]\n";
    report.ranks[r].lastStep.assign(slot.step, strnlen(slot.step, detail::kStepBytes));
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

// runRanksReport, turned into a GoogleTest failure naming the ranks that failed.
inline void runRanks(int nranks, const RankBody& body, const RankOptions& opts = {}) {
  const RunReport report = runRanksReport(nranks, body, opts);
  if (!report.ok()) ADD_FAILURE() << report.summary();
}

}  // namespace mptest

// ---- checks for use inside a rank's body --------------------------------------

// Abort the rank when an NCCL call does not return ncclSuccess.
#define MP_NCCL_CHECK(call)                                                                  \
  do {                                                                                       \
    const ncclResult_t mp_res_ = (call);                                                     \
    if (mp_res_ != ncclSuccess)                                                              \
      ::mptest::checkFailed(__FILE__, __LINE__, "%s returned %d (%s); ncclGetLastError: %s", \
                            #call, static_cast<int>(mp_res_), ncclGetErrorString(mp_res_),    \
                            ncclGetLastError(nullptr));                                      \
  } while (0)

// Abort the rank when cond is false.
#define MP_CHECK(cond, ...)                                                        \
  do {                                                                             \
    if (!(cond)) ::mptest::checkFailed(__FILE__, __LINE__, "check failed: " #cond "; " __VA_ARGS__); \
  } while (0)

// Record a failure and go on (the rank keeps in step with its peers and exits 1).
#define MP_EXPECT(cond, ...)                                                        \
  do {                                                                              \
    if (!(cond)) ::mptest::expectFailed(__FILE__, __LINE__, "expectation failed: " #cond "; " __VA_ARGS__); \
  } while (0)

#endif  // BRAID_TESTS_COMMON_MP_HARNESS_H_
