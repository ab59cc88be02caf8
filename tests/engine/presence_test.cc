// src/engine/presence_board and the host runner's use of it: every rank of a
// host maps the presence slots of its peers at init, /dev/shm keeps none of
// them, and a rank that waits for a peer which cannot run (it waits for the
// CPU the waiter holds) gives the CPU up instead of polling it away; ranks
// pinned one per core do not count as sharing cores. Ranks as
// forked processes (tests/common/mp_nccl.h).
#include <gtest/gtest.h>
#include <nccl.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <vector>

#include "base/cpu_affinity.h"
#include "common/mp_nccl.h"
#include "engine/comm.h"

namespace braid {
namespace {

void checkBoard(int rank, int nranks, const ncclUniqueId& id) {
  ncclComm_t comm;
  MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
  MP_CHECK(comm->presence.self() != nullptr, "rank %d: no presence slot of its own", rank);
  for (int peer = 0; peer < nranks; ++peer)
    if (peer != rank) MP_EXPECT(comm->presence.of(peer) != nullptr, "rank %d: no slot of rank %d", rank, peer);
  // Every name is gone once every rank's init returned: nothing of the slots
  // stays in /dev/shm.
  MP_CHECK(comm->bootstrap->barrier(Clock::now() + std::chrono::seconds(10)).ok(), "rank %d: barrier", rank);
  for (int peer = 0; peer < nranks; ++peer) {
    const char* name = comm->peers[size_t(peer)].presenceName;
    MP_EXPECT(name[0] == '/', "rank %d: rank %d sent no slot name", rank, peer);
    errno = 0;
    const int fd = shm_open(name, O_RDONLY, 0);
    MP_EXPECT(fd < 0 && errno == ENOENT, "rank %d: the slot of rank %d is still in /dev/shm as %s", rank, peer, name);
    if (fd >= 0) close(fd);
  }
  // What a rank writes in its slot is what the others read.
  if (rank == 0) markYielding(*comm->presence.self());
  MP_CHECK(comm->bootstrap->barrier(Clock::now() + std::chrono::seconds(10)).ok(), "rank %d: barrier", rank);
  if (rank != 0) MP_EXPECT(!mayRunElsewhere(*comm->presence.of(0), -1), "rank %d: rank 0 yields, its slot says not", rank);
  MP_CHECK(comm->bootstrap->barrier(Clock::now() + std::chrono::seconds(10)).ok(), "rank %d: barrier", rank);
  MP_NCCL_CHECK(ncclCommDestroy(comm));
}

TEST(PresenceBoard, EveryRankMapsThePeersSlotsAndDevShmKeepsNone) {
  mptest::RankOptions o = mptest::transportOptions("shm", 60);
  o.env.push_back({"BRAID_TIMEOUT", "30"});
  mptest::runRanks(3, checkBoard, o);
}

TEST(PresenceBoard, NcclShmDisableMakesNoSlot) {
  mptest::RankOptions o = mptest::transportOptions("tcp", 60);
  o.env.push_back({"BRAID_TIMEOUT", "30"});
  mptest::runRanks(
      2,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        MP_EXPECT(comm->presence.self() == nullptr, "rank %d: a presence slot in /dev/shm under NCCL_SHM_DISABLE=1", rank);
        MP_EXPECT(comm->peers[size_t(1 - rank)].presenceName[0] == '\0', "rank %d: the peer sent a slot name", rank);
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      o);
}

// Ranks pinned one per core (taskset, mpirun --bind-to core, a job slot per
// rank) each see one CPU, yet every one has a core: they poll the long count
// and heed no presence, as unpinned ranks on as many cores do. Two ranks
// pinned to one CPU are oversubscribed (PresenceHeeded below).
TEST(WaitPolicyChoice, RanksPinnedToACoreEachAreNotOversubscribed) {
  if (allowedCpus().size() < 2) GTEST_SKIP() << "this test needs two CPUs";
  mptest::RankOptions o = mptest::transportOptions("shm", 60);
  o.env.push_back({"BRAID_TIMEOUT", "30"});
  mptest::runRanks(
      2,
      [](int rank, int nranks, const ncclUniqueId& id) {
        const int cpu = allowedCpus()[size_t(rank)];
        MP_CHECK(pinThisThread(cpu), "rank %d: cannot pin to CPU %d", rank, cpu);
        ncclComm_t comm;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        const PeerInfo& self = comm->peers[size_t(rank)];
        MP_EXPECT(self.cpuMask[cpu / 64] == uint64_t(1) << (cpu % 64), "rank %d: its CPU mask is not CPU %d alone",
                  rank, cpu);
        MP_EXPECT(comm->settings.wait.presenceSpinPolls == 0 && comm->settings.wait.spinPolls == 2048,
                  "rank %d: pinned to CPU %d, its peer to another, it was judged oversubscribed (%d and %d polls)",
                  rank, cpu, comm->settings.wait.spinPolls, comm->settings.wait.presenceSpinPolls);
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      o);
}

double userSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec) + double(u.ru_utime.tv_usec) * 1e-6;
}

// Two ranks on one CPU, each told to poll a million times (~10 ms) before it
// yields. Each call, one waits for the other, which cannot run while the
// waiter polls: without presence every such wait polls until the scheduler
// preempts the waiter (milliseconds: 1000 calls cost seconds of CPU time);
// with it the waiter sees its peer on its own CPU and yields at once (1000
// calls: milliseconds). CPU time, not wall time: the bound holds however
// loaded the machine is.
TEST(PresenceHeeded, ARankWaitingForAPeerOnItsOwnCpuGivesTheCpuUp) {
  mptest::RankOptions o = mptest::transportOptions("shm", 120);
  o.env.push_back({"BRAID_TIMEOUT", "60"});
  o.env.push_back({"BRAID_SPIN_POLLS", "1048576"});
  mptest::runRanks(
      2,
      [](int rank, int nranks, const ncclUniqueId& id) {
        const std::vector<int> cpus = allowedCpus();
        const int cpu = cpus.empty() ? -1 : cpus.front();
        MP_CHECK(cpu >= 0 && pinThisThread(cpu), "rank %d: cannot pin to CPU %d", rank, cpu);
        ncclComm_t comm;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        MP_CHECK(comm->settings.wait.presenceSpinPolls == 1048576, "rank %d: presence is not heeded (%d)", rank,
                 comm->settings.wait.presenceSpinPolls);
        std::vector<float> x(2);
        for (int i = 0; i < 10; ++i)
          MP_NCCL_CHECK(ncclAllReduce(x.data(), x.data(), 2, ncclFloat32, ncclSum, comm, nullptr));
        const double before = userSeconds();
        constexpr int kCalls = 1000;
        for (int i = 0; i < kCalls; ++i) {
          x.assign(2, float(rank + i));
          MP_NCCL_CHECK(ncclAllReduce(x.data(), x.data(), 2, ncclFloat32, ncclSum, comm, nullptr));
          MP_CHECK(x[0] == float(2 * i + 1), "rank %d: call %d gave %g", rank, i, x[0]);
        }
        const double spent = userSeconds() - before;
        MP_EXPECT(spent < 0.4, "rank %d: %d calls took %.3f s of CPU time in user space: it polled for a peer "
                  "that could not run", rank, kCalls, spent);
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      o);
}

}  // namespace
}  // namespace braid
