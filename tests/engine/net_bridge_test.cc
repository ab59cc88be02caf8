// src/engine/lanes/net_bridge: messages of a lane FIFO in host memory moved
// over a real transport connection (TCP on loopback, which sends from and
// receives into the FIFO's slots in place) into the peer's FIFO. The test plays both lanes: it
// posts into the sending FIFO and consumes from the receiving one, exactly
// as the plan interpreter's bulk protocol does (kernels/executor/fifo_view.h).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "common/loopback_peers.h"
#include "engine/lanes/net_bridge.h"
#include "kernels/executor/fifo_view.h"
#include "transports/fifo_memory.h"
#include "transports/inproc/inproc_transport.h"
#include "transports/tcp/tcp_transport.h"

namespace braid {
namespace lanes {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kSlots = 4;
constexpr size_t kSlotBytes = 4096;
constexpr int kPeerOfSender = 3;    // the rank the receiving half names
constexpr int kPeerOfReceiver = 5;  // the rank the sending half names

// The transports with connections (IB has its own suite, over a fake verbs library).
enum class Kind { kTcp };

const char* kindName(Kind k) {
  switch (k) {
    case Kind::kTcp: return "tcp";
  }
  return "?";
}
void PrintTo(Kind k, std::ostream* os) { *os << kindName(k); }

std::unique_ptr<transports::Transport> makeTransport(Kind k) {
  switch (k) {
    case Kind::kTcp: return tcp::makeTcpTransport();
  }
  return nullptr;
}

struct Pair {
  std::unique_ptr<transports::Transport> transport;
  std::unique_ptr<transports::SendConnection> send;
  std::unique_ptr<transports::RecvConnection> recv;
};

Pair connectPair(Kind kind, size_t slotBytes = kSlotBytes) {
  Pair p;
  p.transport = makeTransport(kind);
  const PeerInfo r0 = braidtest::makePeer(0, 100), r1 = braidtest::makePeer(1, 101);
  std::unique_ptr<transports::RecvEndpoint> ep;
  Result r = p.transport->listen(braidtest::makeRequest(r0, r1, slotBytes, int(kSlots)), &ep);
  if (r.ok()) r = p.transport->connect(braidtest::makeRequest(r1, r0, slotBytes, int(kSlots)), ep->blob(), &p.send);
  if (r.ok()) r = ep->accept(&p.recv);
  EXPECT_TRUE(r.ok()) << r.message();
  return p;
}

// A bulk FIFO in heap memory, counters at 0, as the port table makes for a
// bridged FIFO.
struct HostFifo {
  explicit HostFifo(uint64_t payloadBytes = kSlotBytes) {
    const executor::FifoLayout layout = executor::fifoLayout(executor::Protocol::Bulk, kSlots, payloadBytes);
    Result r = provider->create(layout.totalBytes, [&](char* image) { executor::initFifoImage(image, layout, 0); }, &memory);
    EXPECT_TRUE(r.ok()) << r.message();
    if (r.ok()) view = executor::fifoViewAt(memory->base(), layout);
  }
  uint64_t head() const { return executor::loadAcquire(view.head); }
  uint64_t tail() const { return executor::loadAcquire(view.tail); }

  std::unique_ptr<transports::FifoMemoryProvider> provider = inproc::makeHeapFifoProvider();
  std::unique_ptr<transports::FifoMemory> memory;
  executor::FifoView view;
};

uint8_t patternByte(uint64_t message, size_t i) { return uint8_t(message * 37 + i * 11 + (i >> 8)); }

// Sizes around the edges: empty, one byte, a full slot, odd ones.
size_t sizeOf(uint64_t message) {
  const size_t sizes[] = {1, 0, kSlotBytes, 777, 64, kSlotBytes - 1, 4000};
  return sizes[message % (sizeof sizes / sizeof sizes[0])];
}

// The fingerprint the sending lane stamps on message m.
uint32_t fingerprintOf(uint64_t m) { return 0x9e3779b9u * uint32_t(m) + 1; }

// The sending lane: message m goes into its slot if the FIFO has room.
bool lanePost(HostFifo& f, uint64_t m, size_t bytes) {
  if (m - f.tail() > kSlots) return false;
  uint8_t* slot = reinterpret_cast<uint8_t*>(f.view.slot(m));
  for (size_t i = 0; i < bytes; ++i) slot[i] = patternByte(m, i);
  f.view.sizes[m % kSlots] = executor::messageWord(bytes, fingerprintOf(m));
  executor::storeRelease(f.view.head, m);
  return true;
}

// The receiving lane: checks message m if it arrived, then frees its slot.
// Returns false while it has not arrived; sets *error on wrong content.
bool laneConsume(HostFifo& f, uint64_t m, std::string* error) {
  if (f.head() < m) return false;
  const uint64_t word = f.view.sizes[m % kSlots];
  const size_t bytes = executor::messageBytes(word);
  if (bytes != sizeOf(m)) *error = "message " + std::to_string(m) + ": " + std::to_string(bytes) + " bytes";
  if (executor::messageFingerprint(word) != fingerprintOf(m))
    *error = "message " + std::to_string(m) + ": fingerprint " + std::to_string(executor::messageFingerprint(word));
  const uint8_t* slot = reinterpret_cast<const uint8_t*>(f.view.slot(m));
  for (size_t i = 0; i < bytes && error->empty(); ++i)
    if (slot[i] != patternByte(m, i)) *error = "message " + std::to_string(m) + ": byte " + std::to_string(i);
  executor::storeRelease(f.view.tail, m);
  return true;
}

// Pumps `bridges` until done() (true) or 5 s pass (false).
bool pumpUntil(const std::vector<NetBridge*>& bridges, const std::function<bool()>& done) {
  const auto deadline = Clock::now() + 5s;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    for (NetBridge* b : bridges) b->pump();
  }
  return true;
}

// A sending and a receiving bridge (two ranks) over one connection.
struct Bridged {
  explicit Bridged(Kind kind) : pair(connectPair(kind)) {
    if (!pair.send || !pair.recv) return;
    sender.addSend(out.view, pair.send.get(), kPeerOfReceiver);
    receiver.addRecv(in.view, pair.recv.get(), kPeerOfSender);
  }
  bool ok() const { return pair.send && pair.recv; }
  Pair pair;
  HostFifo out, in;
  NetBridge sender, receiver;
};

class AnyConnection : public ::testing::TestWithParam<Kind> {};

// More messages than slots, so that both FIFOs and the connection wrap.
TEST_P(AnyConnection, MessagesArriveInOrderWithTheirSizes) {
  Bridged b(GetParam());
  ASSERT_TRUE(b.ok());
  const uint64_t total = 5 * kSlots + 3;
  uint64_t posted = 0, consumed = 0;
  std::string error;
  const auto deadline = Clock::now() + 5s;
  while (consumed < total && error.empty() && Clock::now() < deadline) {
    if (posted < total && lanePost(b.out, posted + 1, sizeOf(posted + 1))) ++posted;
    b.sender.pump();
    b.receiver.pump();
    if (laneConsume(b.in, consumed + 1, &error)) ++consumed;
  }
  EXPECT_EQ(error, "");
  EXPECT_EQ(consumed, total);
  EXPECT_TRUE(pumpUntil({&b.sender}, [&] { return b.sender.flushed(); }));
  EXPECT_EQ(b.out.tail(), total) << "the sending lane did not get its slots back";
  EXPECT_TRUE(b.sender.error().ok()) << b.sender.error().message();
  EXPECT_TRUE(b.receiver.closedReceivers().empty());
}

// A group ends only once everything its lanes posted left this process.
TEST_P(AnyConnection, FlushedOnlyOnceEveryPostedMessageWasForwarded) {
  Bridged b(GetParam());
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(b.sender.flushed()) << "nothing posted yet";
  ASSERT_TRUE(lanePost(b.out, 1, 100));
  EXPECT_FALSE(b.sender.flushed()) << "a posted message was never forwarded";
  EXPECT_TRUE(pumpUntil({&b.sender}, [&] { return b.sender.flushed(); }));
  std::string error;
  EXPECT_TRUE(pumpUntil({&b.sender, &b.receiver}, [&] { return b.in.head() == 1; }));
  EXPECT_EQ(b.in.view.sizes[1], executor::messageWord(100, fingerprintOf(1)));
}

// The receiving lane's free slots bound what is delivered; the rest waits
// (in the connection, then in the sender's FIFO), and follows once freed.
TEST_P(AnyConnection, DeliveryWaitsForTheReceivingLane) {
  Bridged b(GetParam());
  ASSERT_TRUE(b.ok());
  uint64_t posted = 0;
  ASSERT_TRUE(pumpUntil({&b.sender, &b.receiver}, [&] {
    if (posted < 2 * kSlots && lanePost(b.out, posted + 1, sizeOf(posted + 1))) ++posted;
    return b.in.head() == kSlots;
  }));
  for (int i = 0; i < 200; ++i) {
    if (posted < 2 * kSlots && lanePost(b.out, posted + 1, sizeOf(posted + 1))) ++posted;
    b.sender.pump();
    b.receiver.pump();
  }
  EXPECT_EQ(b.in.head(), kSlots) << "a message overwrote a slot the lane had not consumed";
  std::string error;
  uint64_t consumed = 0;
  EXPECT_TRUE(pumpUntil({&b.sender, &b.receiver}, [&] {
    if (posted < 2 * kSlots && lanePost(b.out, posted + 1, sizeOf(posted + 1))) ++posted;
    if (laneConsume(b.in, consumed + 1, &error)) ++consumed;
    return consumed == 2 * kSlots;
  }));
  EXPECT_EQ(error, "");
}

INSTANTIATE_TEST_SUITE_P(Transports, AnyConnection, ::testing::Values(Kind::kTcp),
                         [](const ::testing::TestParamInfo<Kind>& i) { return std::string(kindName(i.param)); });

// A read is a system call: a runner polling its lanes reads a socket only
// when asked to, or when a lane waits on that FIFO.
TEST(NetBridge, SocketIsReadOnlyWhereALaneWaits) {
  Bridged b(Kind::kTcp);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(lanePost(b.out, 1, 512));
  ASSERT_TRUE(pumpUntil({&b.sender}, [&] { return b.sender.flushed(); }));
  uint64_t other = 0;
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(b.receiver.pump(false, {}));
    EXPECT_FALSE(b.receiver.pump(false, {&other}));
  }
  EXPECT_EQ(b.in.head(), 0u) << "the socket was read though no lane waited";
  const auto deadline = Clock::now() + 5s;
  while (b.in.head() == 0 && Clock::now() < deadline) b.receiver.pump(false, {b.in.view.head});
  EXPECT_EQ(b.in.head(), 1u);
}

// A peer that finished closes its connection: what it sent before is still
// delivered, and the close is reported only once the lane consumed it.
TEST(NetBridge, ClosedSenderIsReportedAfterItsMessages) {
  Bridged b(Kind::kTcp);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(lanePost(b.out, 1, sizeOf(1)));
  ASSERT_TRUE(lanePost(b.out, 2, sizeOf(2)));
  ASSERT_TRUE(pumpUntil({&b.sender}, [&] { return b.sender.flushed(); }));
  b.pair.send.reset();
  ASSERT_TRUE(pumpUntil({&b.receiver}, [&] { return b.in.head() == 2; }));
  for (int i = 0; i < 20; ++i) b.receiver.pump();
  EXPECT_TRUE(b.receiver.closedReceivers().empty()) << "reported before the lane consumed the last messages";
  std::string error;
  ASSERT_TRUE(laneConsume(b.in, 1, &error) && laneConsume(b.in, 2, &error));
  EXPECT_EQ(error, "");
  ASSERT_TRUE(pumpUntil({&b.receiver}, [&] { return !b.receiver.closedReceivers().empty(); }));
  const auto closed = b.receiver.closedReceivers();
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].first, kPeerOfSender);
  EXPECT_EQ(closed[0].second.code(), ncclRemoteError);
  EXPECT_NE(closed[0].second.message().find("network bridge, receiving from rank 3"), std::string::npos)
      << closed[0].second.message();
  EXPECT_NE(closed[0].second.message().find("closed its TCP connection"), std::string::npos)
      << closed[0].second.message();
  EXPECT_TRUE(b.receiver.error().ok()) << "a closed receiver is the watchdog's call, not the bridge's error";
}

TEST(NetBridge, FailedSendStopsTheBridgeNamingThePeer) {
  Bridged b(Kind::kTcp);
  ASSERT_TRUE(b.ok());
  b.pair.recv.reset();
  uint64_t posted = 0;
  EXPECT_TRUE(pumpUntil({&b.sender}, [&] {
    if (lanePost(b.out, posted + 1, kSlotBytes)) ++posted;
    return !b.sender.error().ok();
  })) << "the bridge kept sending into a closed connection";
  EXPECT_EQ(b.sender.error().code(), ncclRemoteError);
  EXPECT_NE(b.sender.error().message().find("network bridge, sending to rank 5"), std::string::npos)
      << b.sender.error().message();
  lanePost(b.out, posted + 1, 8);
  EXPECT_FALSE(b.sender.pump()) << "a failed bridge moved a message";
}

// The sizes come from the peer: one larger than the receiving FIFO's slot
// must stop that half rather than overrun the slot.
TEST(NetBridge, OversizedMessageClosesTheReceivingHalf) {
  Pair p = connectPair(Kind::kTcp);
  ASSERT_TRUE(p.send && p.recv);
  HostFifo out, in(1024);
  NetBridge sender, receiver;
  sender.addSend(out.view, p.send.get(), kPeerOfReceiver);
  receiver.addRecv(in.view, p.recv.get(), kPeerOfSender);
  ASSERT_TRUE(lanePost(out, 1, 2000));
  ASSERT_TRUE(pumpUntil({&sender, &receiver}, [&] { return !receiver.closedReceivers().empty(); }));
  const auto closed = receiver.closedReceivers();
  EXPECT_EQ(closed[0].first, kPeerOfSender);
  EXPECT_NE(closed[0].second.message().find("rank 3 sent 2000 bytes, more than a slot's 1024"), std::string::npos)
      << closed[0].second.message();
  EXPECT_EQ(in.head(), 0u) << "the oversized message was delivered";
  EXPECT_FALSE(receiver.pump());
}

}  // namespace
}  // namespace lanes
}  // namespace braid
