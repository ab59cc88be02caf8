// A repeated call allocates nothing: the path of every small collective
// (group bookkeeping, the plan cache's lookup, the rebind of the kept lanes,
// the run) reuses what the first call of its shape made. One rank: a call
// that waits long enough for the watchdog's first look (1024 idle rounds, a
// peer descheduled on a loaded machine) builds strings in its peer check, so
// a count between ranks would depend on the machine's load. An
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

}  // namespace
