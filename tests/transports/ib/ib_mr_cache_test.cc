// Registration cache over a fake registrar that records every call.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "transports/ib/ib_mr_cache.h"

namespace braid {
namespace ib {
namespace {

class FakeRegistrar : public MrRegistrar {
 public:
  struct Range {
    uintptr_t addr;
    size_t bytes;
  };
  Result registerRange(uintptr_t addr, size_t bytes, void** handle, MrKeys* keys) override {
    if (failNext) {
      failNext = false;
      return fail(ncclSystemError, "fake registration failure");
    }
    const uintptr_t id = ++nextId;
    live[id] = Range{addr, bytes};
    registered.push_back(Range{addr, bytes});
    *handle = reinterpret_cast<void*>(id);
    keys->lkey = static_cast<uint32_t>(id * 10);
    keys->rkey = static_cast<uint32_t>(id * 10 + 1);
    return Result::success();
  }
  void deregister(void* handle) override {
    const auto id = reinterpret_cast<uintptr_t>(handle);
    EXPECT_EQ(live.erase(id), 1u) << "deregistered twice or never registered: " << id;
    deregistered.push_back(id);
  }
  uintptr_t nextId = 0;
  bool failNext = false;
  std::map<uintptr_t, Range> live;
  std::vector<Range> registered;
  std::vector<uintptr_t> deregistered;
};

const void* at(uintptr_t a) { return reinterpret_cast<const void*>(a); }

TEST(IbMrCache, CoveredRequestReusesRegistration) {
  FakeRegistrar reg;
  MrCache cache(&reg, 4);
  MrKeys k1, k2, k3;
  ASSERT_TRUE(cache.get(at(0x10010), 100, &k1).ok());
  ASSERT_EQ(reg.registered.size(), 1u);
  EXPECT_EQ(reg.registered[0].addr, 0x10000u);  // widened to pages
  EXPECT_EQ(reg.registered[0].bytes, 0x1000u);
  ASSERT_TRUE(cache.get(at(0x10800), 0x800, &k2).ok());  // same page
  EXPECT_EQ(reg.registered.size(), 1u);
  EXPECT_EQ(k1.lkey, k2.lkey);
  EXPECT_EQ(k1.rkey, k2.rkey);
  ASSERT_TRUE(cache.get(at(0x10800), 0x801, &k3).ok());  // crosses into the next page
  EXPECT_EQ(reg.registered.size(), 2u);
  EXPECT_NE(k3.lkey, k1.lkey);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 2u);
}

TEST(IbMrCache, LeastRecentlyUsedEvicted) {
  FakeRegistrar reg;
  MrCache cache(&reg, 2);
  MrKeys k;
  ASSERT_TRUE(cache.get(at(0x100000), 10, &k).ok());  // id 1
  ASSERT_TRUE(cache.get(at(0x200000), 10, &k).ok());  // id 2
  ASSERT_TRUE(cache.get(at(0x100000), 10, &k).ok());  // hit: 1 becomes most recent
  ASSERT_TRUE(cache.get(at(0x300000), 10, &k).ok());  // id 3 evicts 2
  ASSERT_EQ(reg.deregistered.size(), 1u);
  EXPECT_EQ(reg.deregistered[0], 2u);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.evictions(), 1u);
  ASSERT_TRUE(cache.get(at(0x100000), 10, &k).ok());
  EXPECT_EQ(k.lkey, 10u);  // still the first registration
  ASSERT_TRUE(cache.get(at(0x200000), 10, &k).ok());  // re-registered, evicts 3
  EXPECT_EQ(k.lkey, 40u);
  EXPECT_EQ(reg.deregistered.back(), 3u);
}

TEST(IbMrCache, DestructionDeregistersEverything) {
  FakeRegistrar reg;
  {
    MrCache cache(&reg, 8);
    MrKeys k;
    for (uintptr_t i = 1; i <= 5; ++i) ASSERT_TRUE(cache.get(at(i << 20), 4096, &k).ok());
    EXPECT_EQ(reg.live.size(), 5u);
  }
  EXPECT_TRUE(reg.live.empty());
  EXPECT_EQ(reg.deregistered.size(), 5u);
}

TEST(IbMrCache, InvalidateDropsOverlappingRangesOnly) {
  FakeRegistrar reg;
  MrCache cache(&reg, 8);
  MrKeys k;
  ASSERT_TRUE(cache.get(at(0x100000), 0x2000, &k).ok());  // [0x100000, 0x102000)
  ASSERT_TRUE(cache.get(at(0x200000), 0x1000, &k).ok());
  cache.invalidate(at(0x101fff), 1);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(reg.live.size(), 1u);
  EXPECT_EQ(reg.live.begin()->second.addr, 0x200000u);
  cache.invalidate(at(0x201000), 0x1000);  // adjacent, not overlapping
  EXPECT_EQ(cache.size(), 1u);
  ASSERT_TRUE(cache.get(at(0x100000), 16, &k).ok());  // registered afresh
  EXPECT_EQ(reg.registered.size(), 3u);
}

TEST(IbMrCache, FailuresAndBadRequests) {
  FakeRegistrar reg;
  MrCache cache(&reg, 2);
  MrKeys k;
  reg.failNext = true;
  Result r = cache.get(at(0x100000), 10, &k);
  EXPECT_EQ(r.code(), ncclSystemError);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.get(at(0x100000), 0, &k).code(), ncclInvalidArgument);
  EXPECT_EQ(cache.get(at(UINTPTR_MAX - 4), 10, &k).code(), ncclInvalidArgument);
  ASSERT_TRUE(cache.get(at(UINTPTR_MAX - 100), 50, &k).ok());  // last page: no wrap
  EXPECT_EQ(reg.registered.back().addr + reg.registered.back().bytes, UINTPTR_MAX - 50);
}

}  // namespace
}  // namespace ib
}  // namespace braid
