// The RC data path end to end over the fake libibverbs (tests/transports/ib/fake_ibverbs.c):
// both ends of a connection in this process, the fake copying RDMA writes
// between them and checking keys as an HCA would.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/transports/ib/ib_fixture.h"
#include "transports/ib/ib_blob.h"
#include "transports/ib/ib_completion.h"
#include "transports/ib/ib_connection.h"
#include "transports/ib/ib_probe.h"
#include "transports/ib/ib_transport.h"
#include "transports/tcp/tcp_transport.h"

namespace braid {
namespace ib {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Entry points of the fake beyond libibverbs' own.
struct Fake {
  int (*liveObjects)();
  int (*liveQps)();
  int (*liveMrs)();
  void (*injectSendError)(int status, int after);
  uint64_t (*bytesWritten)();
};

Fake fake() {
  void* h = dlopen(BRAID_FAKE_IBVERBS, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(h, nullptr) << "the fake is loaded by the probe";
  Fake f{};
  if (!h) return f;
  f.liveObjects = reinterpret_cast<int (*)()>(dlsym(h, "fake_ibv_live_objects"));
  f.liveQps = reinterpret_cast<int (*)()>(dlsym(h, "fake_ibv_live_qps"));
  f.liveMrs = reinterpret_cast<int (*)()>(dlsym(h, "fake_ibv_live_mrs"));
  f.injectSendError = reinterpret_cast<void (*)(int, int)>(dlsym(h, "fake_ibv_inject_send_error"));
  f.bytesWritten = reinterpret_cast<uint64_t (*)()>(dlsym(h, "fake_ibv_bytes_written"));
  dlclose(h);  // still loaded through the probe's library
  return f;
}

PeerInfo peer(int rank, uint64_t hostHash) {
  PeerInfo p{};
  p.rank = rank;
  p.cudaDev = -1;
  p.hostHash = hostHash;
  p.pid = 1000 + rank;
  snprintf(p.hostname, sizeof(p.hostname), "node%d", rank);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  memcpy(p.tcpAddr, &a, sizeof(a));
  return p;
}

transports::ConnectRequest request(const PeerInfo& self, const PeerInfo& other, size_t slotBytes, int nslots) {
  transports::ConnectRequest r;
  r.self = self;
  r.peer = other;
  r.channel = 0;
  r.slotBytes = slotBytes;
  r.nslots = nslots;
  r.deadline = Clock::now() + std::chrono::seconds(30);
  return r;
}

// A probe over a fixture sysfs (one active InfiniBand port) and the fake library.
class IbDataPath : public ::testing::Test {
 protected:
  void SetUp() override {
    fx_.addPort("mlx5_0", 1, "4: ACTIVE", "InfiniBand");
    IbProbeOptions o;
    o.sysRoot = fx_.root();
    o.soname = BRAID_FAKE_IBVERBS;
    IbProbeResult p = probeIb(o);
    ASSERT_TRUE(p.usable) << p.reason;
    lib_ = p.lib;  // keeps the fake loaded, so its counters survive the transport
    f_ = fake();
    ASSERT_TRUE(f_.liveObjects && f_.liveQps && f_.liveMrs && f_.injectSendError && f_.bytesWritten);
    baseline_ = f_.liveObjects();
    IbTransportOptions on;
    on.dataPath = true;
    transport_ = makeIbTransport(std::move(p), on);
  }

  // Receiver is rank 1 ("node1"), sender rank 0 ("node0"), on different hosts.
  void connectPair(size_t slotBytes, int nslots, Blob (*tamper)(const Blob&) = nullptr) {
    const PeerInfo s = peer(0, 0xa), r = peer(1, 0xb);
    std::unique_ptr<transports::RecvEndpoint> ep;
    Result res = transport_->listen(request(r, s, slotBytes, nslots), &ep);
    ASSERT_TRUE(res.ok()) << res.message();
    const Blob blob = tamper ? tamper(ep->blob()) : ep->blob();
    res = transport_->connect(request(s, r, slotBytes, nslots), blob, &send_);
    ASSERT_TRUE(res.ok()) << res.message();
    res = ep->accept(&recv_);
    ASSERT_TRUE(res.ok()) << res.message();
  }

  SysfsFixture fx_;
  std::shared_ptr<VerbsLibrary> lib_;
  Fake f_{};
  int baseline_ = 0;
  std::unique_ptr<transports::Transport> transport_;
  std::unique_ptr<transports::SendConnection> send_;
  std::unique_ptr<transports::RecvConnection> recv_;
};

uint8_t pattern(uint64_t seq, size_t i) { return static_cast<uint8_t>(seq * 131 + i * 7 + 1); }
size_t sizeOf(uint64_t seq, size_t slotBytes) { return (seq * 997) % (slotBytes + 1); }

TEST_F(IbDataPath, ManySlotsOfVariedSizesArriveInOrderWhileCreditsFlow) {
  constexpr size_t kSlot = 4096;
  constexpr int kSlots = 3;
  constexpr uint64_t kTotal = 2000;
  connectPair(kSlot, kSlots);
  ASSERT_TRUE(send_ && recv_);
  const uint64_t bytesBefore = f_.bytesWritten();
  uint64_t posted = 0, received = 0, payload = 0, blockedOnCredit = 0;
  for (int round = 0; received < kTotal; ++round) {
    ASSERT_LT(round, 100000) << "stalled at " << posted << " posted, " << received << " received";
    ASSERT_TRUE(send_->progress().ok());
    while (posted < kTotal) {
      void* buf = send_->acquire();
      if (!buf) {
        // Only credits stop it: the FIFO holds exactly nslots un-released slots.
        ASSERT_EQ(posted - received, uint64_t{kSlots});
        ++blockedOnCredit;
        break;
      }
      ASSERT_LT(posted - received, uint64_t{kSlots});
      EXPECT_EQ(send_->acquire(), buf) << "acquire before post returns the same slot";
      const size_t n = sizeOf(posted, kSlot);
      for (size_t i = 0; i < n; ++i) static_cast<uint8_t*>(buf)[i] = pattern(posted, i);
      send_->post(n);
      payload += n;
      ++posted;
    }
    // The receiver drains a varying number, so credits return in partial batches.
    Result r = recv_->progress();
    ASSERT_TRUE(r.ok()) << r.message();
    for (int k = 0; k <= round % kSlots; ++k) {
      size_t got = 0;
      const auto* p = static_cast<const uint8_t*>(recv_->peek(&got));
      if (!p) break;
      ASSERT_EQ(got, sizeOf(received, kSlot)) << "slot " << received;
      for (size_t i = 0; i < got; ++i)
        ASSERT_EQ(p[i], pattern(received, i)) << "slot " << received << " byte " << i;
      recv_->release();
      ++received;
    }
  }
  EXPECT_GT(blockedOnCredit, 100u);
  size_t got = 0;
  EXPECT_EQ(recv_->peek(&got), nullptr);
  // Every payload byte crossed by RDMA write (plus 8 bytes per credit).
  EXPECT_GE(f_.bytesWritten() - bytesBefore, payload);
  for (int i = 0; i < 3 && !send_->flushed(); ++i) ASSERT_TRUE(send_->progress().ok());
  EXPECT_TRUE(send_->flushed());
  EXPECT_TRUE(send_->checkPeer().ok());
  EXPECT_TRUE(recv_->checkPeer().ok());
}

TEST_F(IbDataPath, IdleSenderFlushesWithAMarker) {
  connectPair(1024, 8);  // signals every 4th write
  void* buf = send_->acquire();
  ASSERT_NE(buf, nullptr);
  send_->post(10);
  ASSERT_TRUE(send_->progress().ok());
  EXPECT_FALSE(send_->flushed()) << "an unsignalled write cannot be known complete yet";
  ASSERT_TRUE(send_->progress().ok());  // idle: posts the signalled marker
  ASSERT_TRUE(send_->progress().ok());
  EXPECT_TRUE(send_->flushed());
  ASSERT_TRUE(recv_->progress().ok());
  size_t got = 0;
  ASSERT_NE(recv_->peek(&got), nullptr);
  EXPECT_EQ(got, 10u);  // the marker wrote nothing and consumed no receive
  recv_->release();
  ASSERT_TRUE(recv_->progress().ok());
  EXPECT_EQ(recv_->peek(&got), nullptr);
}

// Each slot's mark (the engine's fingerprint of its message) arrives with it,
// a full slot's and an empty one's included.
TEST_F(IbDataPath, MarksTravelWithTheirSlots) {
  connectPair(64, 4);
  const size_t sizes[] = {64, 0, 7};
  const uint32_t marks[] = {0xfeedbeefu, 1u, 0x80000000u};
  for (int k = 0; k < 3; ++k) {
    void* buf = send_->acquire();
    ASSERT_NE(buf, nullptr);
    memset(buf, 0x40 + k, sizes[k]);
    send_->post(sizes[k], marks[k]);
    ASSERT_TRUE(send_->progress().ok());
  }
  ASSERT_TRUE(recv_->progress().ok());
  for (int k = 0; k < 3; ++k) {
    size_t got = 0;
    uint32_t mark = 0;
    const auto* p = static_cast<const uint8_t*>(recv_->peek(&got, &mark));
    ASSERT_NE(p, nullptr) << "slot " << k;
    EXPECT_EQ(got, sizes[k]);
    EXPECT_EQ(mark, marks[k]);
    for (size_t i = 0; i < got; ++i) ASSERT_EQ(p[i], 0x40 + k);
    recv_->release();
  }
}

Blob badRkey(const Blob& in) {
  IbConnInfo info;
  EXPECT_TRUE(decodeIbBlob(in, "test", &info).ok());
  info.rkey ^= 0x5a5a;
  return encodeIbBlob(info);
}

TEST_F(IbDataPath, BadRkeyIsARemoteErrorNamingThePeer) {
  connectPair(1024, 4, badRkey);
  void* buf = send_->acquire();
  ASSERT_NE(buf, nullptr);
  send_->post(100);
  Result r = send_->progress();
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_TRUE(contains(r.message(), "rank 1 (host node1")) << r.message();
  EXPECT_TRUE(contains(r.message(), "IBV_WC_REM_ACCESS_ERR")) << r.message();
  EXPECT_EQ(send_->acquire(), nullptr);  // the connection stays failed
  EXPECT_EQ(send_->progress().code(), ncclRemoteError);
  // The responder's QP failed too: its receives are flushed.
  Result rr = recv_->progress();
  EXPECT_FALSE(rr.ok());
  EXPECT_TRUE(contains(rr.message(), "rank 0 (host node0")) << rr.message();
  EXPECT_TRUE(contains(rr.message(), "IBV_WC_WR_FLUSH_ERR")) << rr.message();
}

TEST_F(IbDataPath, InjectedCompletionErrorsSurfaceCleanly) {
  connectPair(1024, 4);
  ASSERT_NE(send_->acquire(), nullptr);
  f_.injectSendError(kWcRetryExcErr, 0);
  send_->post(32);
  Result r = send_->progress();
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_TRUE(contains(r.message(), "rank 1 (host node1")) << r.message();
  EXPECT_TRUE(contains(r.message(), "IBV_WC_RETRY_EXC_ERR")) << r.message();
  EXPECT_TRUE(send_->checkPeer().code() == ncclRemoteError);
}

TEST_F(IbDataPath, InjectedLocalErrorIsASystemError) {
  connectPair(1024, 4);
  ASSERT_NE(send_->acquire(), nullptr);
  f_.injectSendError(kWcLocProtErr, 0);
  send_->post(64);
  Result r = send_->progress();
  EXPECT_EQ(r.code(), ncclSystemError);
  EXPECT_TRUE(contains(r.message(), "IBV_WC_LOC_PROT_ERR")) << r.message();
  EXPECT_TRUE(contains(r.message(), "rank 1")) << r.message();
}

TEST_F(IbDataPath, ErrorInACreditWriteReachesTheReceiver) {
  connectPair(1024, 2);  // a credit per release
  ASSERT_NE(send_->acquire(), nullptr);
  send_->post(8);
  ASSERT_TRUE(recv_->progress().ok());
  size_t got = 0;
  ASSERT_NE(recv_->peek(&got), nullptr);
  f_.injectSendError(kWcRetryExcErr, 0);  // the credit write is the next send WR
  recv_->release();
  Result r = recv_->progress();
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_TRUE(contains(r.message(), "credits to rank 0")) << r.message();
}

TEST_F(IbDataPath, PeerGoneIsNoticed) {
  connectPair(1024, 4);
  recv_.reset();  // its QP and handshake socket go away
  Result r = send_->checkPeer();
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_TRUE(contains(r.message(), "rank 1 (host node1")) << r.message();
  ASSERT_NE(send_->acquire(), nullptr);  // credits were granted before it went
  send_->post(16);
  r = send_->progress();
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_TRUE(contains(r.message(), "IBV_WC_RETRY_EXC_ERR")) << r.message();
}

TEST_F(IbDataPath, RegistrationGoesThroughTheCacheAndHits) {
  connectPair(4096, 4);
  auto* s = dynamic_cast<IbSend*>(send_.get());
  auto* r = dynamic_cast<IbRecv*>(recv_.get());
  ASSERT_TRUE(s && r);
  // One registration per end; the ring and credit word are found inside it.
  EXPECT_EQ(f_.liveMrs(), 2);
  EXPECT_EQ(s->resources().cache().misses(), 1u);
  EXPECT_EQ(s->resources().cache().hits(), 2u);  // credit word, staging slots
  EXPECT_EQ(r->resources().cache().misses(), 1u);
  EXPECT_EQ(r->resources().cache().hits(), 1u);  // the ring, for the blob's rkey

  // Repeated lookups of the same buffers hit and register nothing new.
  std::shared_ptr<IbDevice> dev;
  IbProbeOptions o;
  o.sysRoot = fx_.root();
  o.soname = BRAID_FAKE_IBVERBS;
  IbProbeResult p = probeIb(o);
  ASSERT_TRUE(IbDevice::open(p.lib, p.ports[0], -1, &dev).ok());
  std::unique_ptr<IbQpResources> res;
  IbQpResources::Shape shape;
  shape.ringBytes = 3 * 4096;
  shape.sendDepth = 4;
  shape.recvDepth = 4;
  ASSERT_TRUE(IbQpResources::create(dev, shape, &res).ok());
  const int mrs = f_.liveMrs();
  MrKeys first, again;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(res->keys(res->ring() + 4096, 100, &again).ok());
    if (i == 0) first = again;
    EXPECT_EQ(again.rkey, first.rkey);
  }
  EXPECT_EQ(f_.liveMrs(), mrs);
  EXPECT_EQ(res->cache().hits(), 10u);
  EXPECT_EQ(res->cache().misses(), 1u);
}

TEST_F(IbDataPath, TeardownLeavesNoFakeObjects) {
  connectPair(2048, 4);
  EXPECT_GT(f_.liveObjects(), baseline_);
  EXPECT_EQ(f_.liveQps(), 2);
  // The transport (which opened the device) goes first: connections keep what they use.
  transport_.reset();
  ASSERT_NE(send_->acquire(), nullptr);
  send_->post(100);
  ASSERT_TRUE(recv_->progress().ok());
  size_t got = 0;
  EXPECT_NE(recv_->peek(&got), nullptr);
  send_.reset();
  recv_.reset();
  EXPECT_EQ(f_.liveQps(), 0);
  EXPECT_EQ(f_.liveMrs(), 0);
  EXPECT_EQ(f_.liveObjects(), baseline_);  // contexts, PDs, CQs, QPs, MRs all gone
}

TEST_F(IbDataPath, GeometryMismatchIsRejected) {
  const PeerInfo s = peer(0, 0xa), r = peer(1, 0xb);
  std::unique_ptr<transports::RecvEndpoint> ep;
  ASSERT_TRUE(transport_->listen(request(r, s, 1024, 4), &ep).ok());
  Result res = transport_->connect(request(s, r, 2048, 4), ep->blob(), &send_);
  EXPECT_EQ(res.code(), ncclInternalError);
  EXPECT_TRUE(contains(res.message(), "disagree")) << res.message();
  EXPECT_EQ(transport_->listen(request(r, s, 0, 4), &ep).code(), ncclInvalidArgument);
}

TEST_F(IbDataPath, ChosenOverTcpOnlyForOtherHostsAndWhenSwitchedOn) {
  std::vector<std::unique_ptr<transports::Transport>> ts;
  ts.push_back(std::move(transport_));
  ts.push_back(tcp::makeTcpTransport());
  auto chosen = [&](const PeerInfo& a, const PeerInfo& b) -> std::string {
    for (auto& t : ts)
      if (t->canConnect(a, b)) return t->name();
    return "";
  };
  EXPECT_EQ(chosen(peer(0, 1), peer(1, 2)), "ib");
  EXPECT_EQ(chosen(peer(0, 1), peer(1, 1)), "tcp");  // same host: never ib

  IbProbeOptions o;
  o.sysRoot = fx_.root();
  o.soname = BRAID_FAKE_IBVERBS;
  ts[0] = makeIbTransport(probeIb(o));  // default options: the switch is off
  EXPECT_EQ(chosen(peer(0, 1), peer(1, 2)), "tcp");
}

TEST(IbSwitch, VariableTurnsTheDataPathOn) {
  unsetenv("BRAID_IB_DATAPATH");
  EXPECT_FALSE(ibTransportOptionsFromEnv().dataPath);
  setenv("BRAID_IB_DATAPATH", "1", 1);
  EXPECT_TRUE(ibTransportOptionsFromEnv().dataPath);
  setenv("BRAID_IB_DATAPATH", "0", 1);
  EXPECT_FALSE(ibTransportOptionsFromEnv().dataPath);
  unsetenv("BRAID_IB_DATAPATH");
}

TEST(IbCompletion, StatusNamesAndClasses) {
  EXPECT_EQ(wcStatusName(kWcSuccess), "IBV_WC_SUCCESS");
  EXPECT_EQ(wcStatusName(kWcRemAccessErr), "IBV_WC_REM_ACCESS_ERR");
  EXPECT_EQ(wcStatusName(kWcGeneralErr), "IBV_WC_GENERAL_ERR");
  EXPECT_EQ(wcStatusName(99), "IBV_WC_STATUS_99");
  EXPECT_TRUE(wcStatusIsRemote(kWcRetryExcErr));
  EXPECT_TRUE(wcStatusIsRemote(kWcRnrRetryExcErr));
  EXPECT_FALSE(wcStatusIsRemote(kWcLocProtErr));
  EXPECT_FALSE(wcStatusIsRemote(kWcWrFlushErr));
  IbvWc wc{};
  wc.status = kWcRemAccessErr;
  wc.vendorErr = 0x88;
  Result r = completionError(wc, "RDMA write to", "rank 4 (host x, pid 9)");
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_TRUE(contains(r.message(), "rank 4 (host x, pid 9)")) << r.message();
  EXPECT_TRUE(contains(r.message(), "0x88")) << r.message();
}

TEST(IbSendQueue, SignalsPeriodicallyAndBoundsOccupancy) {
  SendQueueWindow w(4, 2);
  EXPECT_FALSE(w.signalNext(false));
  w.posted(false);
  EXPECT_TRUE(w.signalNext(false));
  w.posted(true);
  w.posted(false);
  EXPECT_TRUE(w.tailUnsignalled());
  w.posted(true);
  EXPECT_TRUE(w.full());
  w.completed(1);  // the second WR's completion retires the first two
  EXPECT_FALSE(w.full());
  EXPECT_FALSE(w.drained());
  w.completed(3);
  EXPECT_TRUE(w.drained());
  EXPECT_GE(senderQueueDepth(1), senderSignalEvery(1));
  EXPECT_GE(senderQueueDepth(65536), senderSignalEvery(65536));
}

}  // namespace
}  // namespace ib
}  // namespace braid
