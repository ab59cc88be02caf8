// Kill (SIGKILL) or stop (SIGSTOP: alive but silent) one rank in every phase of
// a job, over each transport. Every surviving rank must return a clear error
// within its timeout (never hang), destroy must stay prompt, and nothing may be
// left in /dev/shm once the job is gone.
//   bootstrap: the victim never finishes ncclCommInitRank
//   connect:   it is gone before the first collective (connections are made then)
//   collective: it goes away in the middle of a run of allreduces
//   destroy:   it goes away after the work; the others' ncclCommDestroy
#include <nccl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "common/mp_harness.h"
#include "common/mp_nccl.h"
#include "common/shared_page.h"
#include "soak/resources.h"

namespace {

using Clock = std::chrono::steady_clock;

enum class Phase { Bootstrap, Connect, Collective, Destroy };
enum class Action { Kill, Stop };

constexpr int kRanks = 3;
constexpr int kVictim = kRanks - 1;  // rank 0 holds the bootstrap root
constexpr int kTimeoutSeconds = 3;
constexpr double kLimitSeconds = kTimeoutSeconds + 7.0;  // timeout plus diagnosis and slack

struct Shared {
  std::atomic<int> pid[kRanks];
};

const char* phaseName(Phase p) {
  switch (p) {
    case Phase::Bootstrap: return "bootstrap";
    case Phase::Connect: return "connect";
    case Phase::Collective: return "collective";
    case Phase::Destroy: return "destroy";
  }
  return "?";
}

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void goAway(Action a) { kill(getpid(), a == Action::Kill ? SIGKILL : SIGSTOP); }

// Rank 0 ends a stopped victim once the survivors have their answer, and waits
// until it is gone, so that its own ncclCommDestroy cleans up after it.
void endVictim(Shared* s) {
  const pid_t pid = s->pid[kVictim].load();
  kill(pid, SIGKILL);
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < until) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE* f = fopen(path, "re");
    if (!f) return;
    char buf[512] = {};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    const char* close = strrchr(buf, ')');
    if (n == 0 || (close && close[2] == 'Z')) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void expectClearError(const char* what, ncclResult_t r, double took, ncclComm_t comm, int rank) {
  const std::string message = ncclGetLastError(comm);
  MP_EXPECT(r != ncclSuccess && r != ncclInProgress, "rank %d: %s succeeded (%d) without the victim", rank, what,
            static_cast<int>(r));
  MP_EXPECT(took < kLimitSeconds, "rank %d: %s took %.1f s (timeout %d s)", rank, what, took, kTimeoutSeconds);
  MP_EXPECT(message.find("rank") != std::string::npos, "rank %d: %s: the error names no rank: %s", rank, what,
            message.c_str());
}

void body(Phase phase, Action action, Shared* s, int rank, int nranks, const ncclUniqueId& id) {
  s->pid[rank].store(getpid());
  const bool victim = rank == kVictim;
  if (victim && phase == Phase::Bootstrap) goAway(action);
  ncclComm_t comm = nullptr;
  Clock::time_point start = Clock::now();
  ncclResult_t r = ncclCommInitRank(&comm, nranks, id, rank);
  if (phase == Phase::Bootstrap) {
    expectClearError("ncclCommInitRank", r, since(start), comm, rank);
    if (rank == 0 && action == Action::Stop) endVictim(s);
    return;
  }
  MP_NCCL_CHECK(r);
  std::vector<float> a(1 << 18, 1.0f), b(a.size());
  if (victim && phase == Phase::Connect) goAway(action);
  if (phase == Phase::Collective || phase == Phase::Destroy)
    MP_NCCL_CHECK(ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat32, ncclSum, comm, nullptr));
  if (victim && phase == Phase::Destroy) goAway(action);
  if (victim && phase == Phase::Collective) {
    std::thread([action] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      goAway(action);
    }).detach();
    for (;;) ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat32, ncclSum, comm, nullptr);
  }
  if (phase != Phase::Destroy) {
    r = ncclSuccess;
    for (int i = 0; i < 100000 && r == ncclSuccess; ++i) {
      start = Clock::now();
      r = ncclAllReduce(a.data(), b.data(), a.size(), ncclFloat32, ncclSum, comm, nullptr);
    }
    expectClearError("ncclAllReduce", r, since(start), comm, rank);
  }
  if (rank == 0 && action == Action::Stop) endVictim(s);
  start = Clock::now();
  MP_NCCL_CHECK(ncclCommDestroy(comm));
  MP_EXPECT(since(start) < 2.0, "rank %d: ncclCommDestroy took %.1f s", rank, since(start));
}

class MpFailurePhases : public ::testing::TestWithParam<std::tuple<Phase, Action, std::string>> {};

TEST_P(MpFailurePhases, SurvivorsGetAClearErrorAndNothingIsLeftBehind) {
  const Phase phase = std::get<0>(GetParam());
  const Action action = std::get<1>(GetParam());
  testshm::SharedPage<Shared> page;
  ASSERT_NE(page.get(), nullptr);
  Shared* s = page.get();
  mptest::RankOptions opts = mptest::transportOptions(std::get<2>(GetParam()), 90);
  opts.env.push_back({"BRAID_TIMEOUT", std::to_string(kTimeoutSeconds)});
  opts.env.push_back({"BRAID_BOOTSTRAP_TIMEOUT", std::to_string(kTimeoutSeconds)});
  opts.failGraceSeconds = 60;
  const mptest::RunReport report = mptest::runRanksReport(
      kRanks, [phase, action, s](int rank, int nranks, const ncclUniqueId& id) { body(phase, action, s, rank, nranks, id); },
      opts);
  ASSERT_TRUE(report.setupError.empty()) << report.setupError;
  for (const mptest::RankOutcome& o : report.ranks) {
    if (o.rank == kVictim) {
      EXPECT_EQ(o.kind, mptest::RankOutcome::kCrashed) << report.summary();
    } else {
      EXPECT_EQ(o.kind, mptest::RankOutcome::kOk) << report.summary();
    }
  }
  std::vector<pid_t> pids;
  for (int r = 0; r < kRanks; ++r) pids.push_back(s->pid[r].load());
  const std::vector<std::string> left = soak::shmSegments(pids);
  for (const std::string& n : left) shm_unlink(("/" + n).c_str());
  EXPECT_TRUE(left.empty()) << left.size() << " shared-memory segment(s) left, e.g. /dev/shm/" << left.front();
}

INSTANTIATE_TEST_SUITE_P(
    All, MpFailurePhases,
    ::testing::Combine(::testing::Values(Phase::Bootstrap, Phase::Connect, Phase::Collective, Phase::Destroy),
                       ::testing::Values(Action::Kill, Action::Stop), ::testing::Values("shm", "tcp")),
    [](const ::testing::TestParamInfo<std::tuple<Phase, Action, std::string>>& info) {
      return std::string(phaseName(std::get<0>(info.param))) + "_" +
             (std::get<1>(info.param) == Action::Kill ? "kill" : "stop") + "_" + std::get<2>(info.param);
    });

}  // namespace
