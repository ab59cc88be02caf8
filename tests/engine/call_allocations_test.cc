// A repeated call allocates nothing: the path of every small collective
// (group bookkeeping, the plan cache's lookup, the rebind of the kept lanes,
// the run and its wait) reuses what the first call of its shape made. An
// allocation costs a small call a tenth of its time (malloc and free, ~250
// instructions of ~2500). This binary replaces the global operator new to
// count the allocations of the thread that asks.
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstdlib>
#include <new>
#include <vector>

#include "common/local_comms.h"

namespace {

thread_local bool tlsCounting = false;
thread_local long tlsAllocations = 0;

}  // namespace

void* operator new(std::size_t n) {
  if (tlsCounting) ++tlsAllocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

// Allocations on this thread while `body` runs.
template <class Body>
long allocationsOf(const Body& body) {
  tlsAllocations = 0;
  tlsCounting = true;
  body();
  tlsCounting = false;
  return tlsAllocations;
}

// The count itself works: the test would pass for nothing otherwise.
TEST(CallAllocations, TheCountSeesAnAllocation) {
  EXPECT_GE(allocationsOf([] { std::vector<int> v(100); }), 1);
}

// A lone allreduce outside any group on one rank: no waiting at all.
TEST(CallAllocations, ARepeatedLoneCallOnOneRankAllocatesNothing) {
  braidtest::LocalComms comms(1);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<float> in(16, 1.0f), out(16, 0.0f);
  auto call = [&] {
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comms[0], nullptr), ncclSuccess);
  };
  for (int i = 0; i < 3; ++i) call();  // the first plans, connects and caches
  EXPECT_EQ(allocationsOf([&] {
              for (int i = 0; i < 50; ++i) call();
            }),
            0);
  EXPECT_EQ(out[0], 1.0f);
}

// Two ranks on two threads, each its own lone calls, waiting for the other's
// messages: the runner's turns, back-off and watchdog allocate nothing either.
TEST(CallAllocations, ARepeatedLoneCallBetweenTwoRanksAllocatesNothing) {
  braidtest::LocalComms comms(2);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<long> counts(2, -1);
  std::vector<float> sums(2, 0.0f);
  comms.onEveryRank([&](int r) {
    std::vector<float> in(2, float(r + 1)), out(2, 0.0f);
    bool ok = true;
    auto call = [&] {
      ok = ok && ncclAllReduce(in.data(), out.data(), in.size(), ncclFloat32, ncclSum, comms[r], nullptr) ==
                     ncclSuccess;
    };
    for (int i = 0; i < 3; ++i) call();
    counts[size_t(r)] = allocationsOf([&] {
      for (int i = 0; i < 200; ++i) call();
    });
    sums[size_t(r)] = ok ? out[1] : -1.0f;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(sums[size_t(r)], 3.0f) << "rank " << r;
    EXPECT_EQ(counts[size_t(r)], 0) << "rank " << r;
  }
}

}  // namespace
