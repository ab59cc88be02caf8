// Queue-pair transitions as data, and their order and errors over the stand-in
// library; the verbs registrar under the registration cache.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "transports/ib/ib_qp.h"

namespace braid {
namespace ib {
namespace {

IbConnInfo remoteInfo(uint8_t linkLayer) {
  IbConnInfo r;
  r.qpn = 0x1234;
  r.psn = 0x777;
  r.lid = 9;
  r.port = 1;
  r.mtu = kMtu4096;
  r.linkLayer = linkLayer;
  for (int i = 0; i < 16; ++i) r.gid[i] = static_cast<uint8_t>(i + 1);
  return r;
}

TEST(IbQp, InitAllowsRemoteWriteOnly) {
  QpLocal l;
  l.port = 2;
  int mask = 0;
  const IbvQpAttr a = qpInitAttr(l, &mask);
  EXPECT_EQ(a.qpState, kQpsInit);
  EXPECT_EQ(a.portNum, 2);
  EXPECT_EQ(a.qpAccessFlags, unsigned(kAccessRemoteWrite | kAccessLocalWrite));
  EXPECT_EQ(a.qpAccessFlags & kAccessRemoteRead, 0u);
  EXPECT_EQ(mask, kQpState | kQpPkeyIndex | kQpPort | kQpAccessFlags);
}

TEST(IbQp, RtrOnInfiniBandUsesLid) {
  QpLocal l;
  l.mtu = kMtu2048;
  int mask = 0;
  const IbvQpAttr a = qpRtrAttr(l, remoteInfo(kLinkInfiniBand), &mask);
  EXPECT_EQ(a.qpState, kQpsRtr);
  EXPECT_EQ(a.pathMtu, kMtu2048);  // the smaller end
  EXPECT_EQ(a.destQpNum, 0x1234u);
  EXPECT_EQ(a.rqPsn, 0x777u);
  EXPECT_EQ(a.ahAttr.dlid, 9);
  EXPECT_EQ(a.ahAttr.isGlobal, 0);
  EXPECT_TRUE(mask & kQpAv);
  EXPECT_TRUE(mask & kQpDestQpn);
  EXPECT_TRUE(mask & kQpRqPsn);
  EXPECT_FALSE(mask & kQpSqPsn);
}

TEST(IbQp, RtrOnRoceUsesGlobalRoute) {
  QpLocal l;
  l.mtu = kMtu4096;
  l.gidIndex = 3;
  int mask = 0;
  const IbConnInfo r = remoteInfo(kLinkEthernet);
  IbConnInfo smaller = r;
  smaller.mtu = kMtu1024;
  const IbvQpAttr a = qpRtrAttr(l, r, &mask);
  EXPECT_EQ(a.ahAttr.isGlobal, 1);
  EXPECT_EQ(memcmp(a.ahAttr.grh.dgid.raw, r.gid, 16), 0);
  EXPECT_EQ(a.ahAttr.grh.sgidIndex, 3);
  EXPECT_GT(a.ahAttr.grh.hopLimit, 1);
  EXPECT_EQ(qpRtrAttr(l, smaller, &mask).pathMtu, kMtu1024);
}

TEST(IbQp, RtsSetsSendPsnAndRetries) {
  QpLocal l;
  l.psn = 0xabcde;
  int mask = 0;
  const IbvQpAttr a = qpRtsAttr(l, &mask);
  EXPECT_EQ(a.qpState, kQpsRts);
  EXPECT_EQ(a.sqPsn, 0xabcdeu);
  EXPECT_GT(a.timeout, 0);
  EXPECT_GT(a.retryCnt, 0);
  EXPECT_TRUE(mask & kQpSqPsn);
  EXPECT_FALSE(mask & kQpRqPsn);
}

struct FakeHooks {
  int (*takeStates)(int*, int);
  void (*failState)(int);
};

FakeHooks hooks() {
  void* h = dlopen(BRAID_FAKE_IBVERBS, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(h, nullptr);
  FakeHooks f{reinterpret_cast<int (*)(int*, int)>(dlsym(h, "fake_ibv_take_states")),
              reinterpret_cast<void (*)(int)>(dlsym(h, "fake_ibv_fail_state"))};
  dlclose(h);  // still loaded by the test's VerbsLibrary
  return f;
}

TEST(IbQp, BringUpWalksInitRtrRtsAndNamesFailure) {
  std::shared_ptr<VerbsLibrary> lib;
  ASSERT_TRUE(VerbsLibrary::open(BRAID_FAKE_IBVERBS, &lib).ok());
  FakeHooks f = hooks();
  ASSERT_TRUE(f.takeStates && f.failState);
  int states[16];
  f.takeStates(states, 16);
  IbvQp* qp = reinterpret_cast<IbvQp*>(0x1000);  // the fake never touches it
  ASSERT_TRUE(bringUpQp(*lib, qp, QpLocal{}, remoteInfo(kLinkInfiniBand)).ok());
  ASSERT_EQ(f.takeStates(states, 16), 3);
  EXPECT_EQ(std::vector<int>(states, states + 3),
            (std::vector<int>{kQpsInit, kQpsRtr, kQpsRts}));

  f.failState(kQpsRtr);
  Result r = bringUpQp(*lib, qp, QpLocal{}, remoteInfo(kLinkInfiniBand));
  f.failState(-1);
  EXPECT_EQ(r.code(), ncclSystemError);
  EXPECT_NE(r.message().find("to RTR"), std::string::npos) << r.message();
  EXPECT_EQ(f.takeStates(states, 16), 2);  // stopped at the failure
}

TEST(IbQp, CacheOverVerbsRegistrarDeregistersEverything) {
  std::shared_ptr<VerbsLibrary> lib;
  ASSERT_TRUE(VerbsLibrary::open(BRAID_FAKE_IBVERBS, &lib).ok());
  void* h = dlopen(BRAID_FAKE_IBVERBS, RTLD_NOW | RTLD_NOLOAD);
  auto live = reinterpret_cast<int (*)()>(dlsym(h, "fake_ibv_live_objects"));
  dlclose(h);
  ASSERT_NE(live, nullptr);
  const int before = live();
  std::vector<char> a(1 << 16), b(1 << 16);
  {
    VerbsMrRegistrar reg(lib, reinterpret_cast<IbvPd*>(0x2000), kAccessLocalWrite);
    MrCache cache(&reg, 1);
    MrKeys k;
    ASSERT_TRUE(cache.get(a.data(), a.size(), &k).ok());
    ASSERT_TRUE(cache.get(a.data() + 10, 100, &k).ok());
    EXPECT_EQ(live(), before + 1);
    ASSERT_TRUE(cache.get(b.data(), b.size(), &k).ok());  // evicts a's registration
    EXPECT_EQ(live(), before + 1);
    EXPECT_EQ(cache.evictions(), 1u);
  }
  EXPECT_EQ(live(), before);
}

}  // namespace
}  // namespace ib
}  // namespace braid
