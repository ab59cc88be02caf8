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

// A message by reference (zero_copy.h) goes out from the bytes its slot
// points at, not from the slot; the lane gets its slot back only once they
// have left, and the receiver sees an ordinary message.
TEST(NetBridge, AMessageByReferenceIsSentFromTheBytesItPointsAt) {
  Bridged b(Kind::kTcp);
  ASSERT_TRUE(b.ok());
  std::vector<uint8_t> user(3000);
  for (size_t i = 0; i < user.size(); ++i) user[i] = patternByte(1, i);
  const char* at = reinterpret_cast<const char*>(user.data());
  memcpy(b.out.view.slot(1), &at, sizeof at);
  b.out.view.sizes[1] = executor::messageWord(user.size(), fingerprintOf(1), true);
  executor::storeRelease(b.out.view.head, uint64_t(1));
  ASSERT_TRUE(pumpUntil({&b.sender, &b.receiver}, [&] { return b.sender.flushed() && b.in.head() == 1; }));
  EXPECT_EQ(b.out.tail(), 1u);
  EXPECT_EQ(b.in.view.sizes[1], executor::messageWord(user.size(), fingerprintOf(1)));
  EXPECT_EQ(memcmp(b.in.view.slot(1), user.data(), user.size()), 0) << "the bytes were not those pointed at";
}

// A placed message lands in its destination and reaches the lane by
// reference; the others, and one whose size differs from the placement's,
// land in their slots as always.
void expectPlacement(NetBridge& sender, NetBridge& receiver, HostFifo& out, HostFifo& in) {
  std::vector<uint8_t> dst2(sizeOf(2) + 8, 0xee), dst4(kSlotBytes, 0xee);
  receiver.receiveInPlace({{in.view.head, 2, reinterpret_cast<char*>(dst2.data()), sizeOf(2), nullptr, 0},
                           {in.view.head, 4, reinterpret_cast<char*>(dst4.data()), sizeOf(4) + 1, nullptr, 0}});
  uint64_t posted = 0;
  ASSERT_TRUE(pumpUntil({&sender, &receiver}, [&] {
    if (posted < 5 && lanePost(out, posted + 1, sizeOf(posted + 1))) ++posted;
    return in.head() == 4;
  }));
  for (uint64_t m = 1; m <= 4; ++m) {
    const uint64_t word = in.view.sizes[m % kSlots];
    EXPECT_EQ(executor::messageBytes(word), sizeOf(m));
    EXPECT_EQ(executor::messageFingerprint(word), fingerprintOf(m));
    EXPECT_EQ(executor::messageByReference(word), m == 2) << "message " << m;
  }
  const uint8_t* where = nullptr;
  memcpy(&where, in.view.slot(2), sizeof where);
  EXPECT_EQ(where, dst2.data());
  for (size_t i = 0; i < sizeOf(2); ++i) ASSERT_EQ(dst2[i], patternByte(2, i)) << "byte " << i;
  EXPECT_EQ(dst2[sizeOf(2)], 0xee) << "written past the placed bytes";
  EXPECT_EQ(dst4[0], 0xee) << "a message of another size than its placement's went there";
  std::string error;
  for (uint64_t m : {1, 3, 4}) {
    ASSERT_TRUE(laneConsume(in, m, &error));
    EXPECT_EQ(error, "") << "message " << m;
  }
}

TEST(NetBridge, APlacedMessageArrivesInItsDestination) {
  Bridged b(Kind::kTcp);
  ASSERT_TRUE(b.ok());
  expectPlacement(b.sender, b.receiver, b.out, b.in);
}

// A FIFO whose slots the connection cannot adopt (smaller than its own) is
// copied: the bridge places that message itself.
TEST(NetBridge, ACopiedHalfPlacesMessagesToo) {
  Pair p = connectPair(Kind::kTcp, 2 * kSlotBytes);
  ASSERT_TRUE(p.send && p.recv);
  HostFifo out, in;
  NetBridge sender, receiver;
  sender.addSend(out.view, p.send.get(), kPeerOfReceiver);
  receiver.addRecv(in.view, p.recv.get(), kPeerOfSender);
  expectPlacement(sender, receiver, out, in);
}

// Two ranks' bridges, each with a FIFO to the other and one from it, as a
// communicator's: rank A's lane sends by reference from `user` and receives
// a message that overwrites those bytes (an allreduce in place).
struct Duplex {
  explicit Duplex(size_t connectionSlotBytes = kSlotBytes)
      : ab(connectPair(Kind::kTcp, connectionSlotBytes)), ba(connectPair(Kind::kTcp, connectionSlotBytes)) {
    if (!ok()) return;
    a.addSend(aOut.view, ab.send.get(), 1);
    a.addRecv(aIn.view, ba.recv.get(), 1);
    b.addRecv(bIn.view, ab.recv.get(), 0);
    b.addSend(bOut.view, ba.send.get(), 0);
    for (size_t i = 0; i < user.size(); ++i) user[i] = patternByte(100, i);
  }
  bool ok() const { return ab.send && ab.recv && ba.send && ba.recv; }
  // A's lane posts message m by reference to `user`.
  void postReference(uint64_t m) {
    const char* at = reinterpret_cast<const char*>(user.data());
    memcpy(aOut.view.slot(m), &at, sizeof at);
    aOut.view.sizes[m % kSlots] = executor::messageWord(user.size(), fingerprintOf(m), true);
    executor::storeRelease(aOut.view.head, m);
  }
  // The bytes of message m of a receiving FIFO, wherever the bridge put them.
  static const uint8_t* bytesOf(const HostFifo& f, uint64_t m) {
    const uint8_t* at = reinterpret_cast<const uint8_t*>(f.view.slot(m));
    if (executor::messageByReference(f.view.sizes[m % kSlots])) memcpy(&at, at, sizeof at);
    return at;
  }
  Pair ab, ba;
  HostFifo aOut, aIn, bIn, bOut;
  NetBridge a, b;
  std::vector<uint8_t> user = std::vector<uint8_t>(kSlotBytes);
};

// The message that overwrites a reference is held until the lane posted that
// reference and it left: the peer gets the bytes as they were.
TEST(NetBridge, AMessageOverwritingAReferenceWaitsUntilItLeft) {
  Duplex d;
  ASSERT_TRUE(d.ok());
  d.a.receiveInPlace({{d.aIn.view.head, 1, reinterpret_cast<char*>(d.user.data()), kSlotBytes, d.aOut.view.head, 1}});
  ASSERT_TRUE(lanePost(d.bOut, 1, kSlotBytes));
  for (int i = 0; i < 200; ++i) {
    d.a.pump();
    d.b.pump();
  }
  EXPECT_EQ(d.aIn.head(), 0u) << "delivered before the reference it overwrites was even posted";
  EXPECT_EQ(d.user[0], patternByte(100, 0)) << "placed over bytes still to be sent";
  d.postReference(1);
  ASSERT_TRUE(pumpUntil({&d.a, &d.b}, [&] { return d.aIn.head() == 1 && d.bIn.head() == 1; }));
  const uint8_t* sent = Duplex::bytesOf(d.bIn, 1);
  const uint8_t* got = Duplex::bytesOf(d.aIn, 1);
  for (size_t i = 0; i < kSlotBytes; ++i) {
    ASSERT_EQ(sent[i], patternByte(100, i)) << "byte " << i << " the peer got";
    ASSERT_EQ(got[i], patternByte(1, i)) << "byte " << i << " received";
  }
}

// A reference the bridge could not forward yet (a copied half whose
// connection is full) is copied back into its slot before the message that
// overwrites its bytes is delivered: nothing waits for the peer, and the
// peer still gets the bytes as they were when posted.
TEST(NetBridge, AReferenceStillInTheFifoIsCopiedBackBeforeItsBytesAreOverwritten) {
  Duplex d(2 * kSlotBytes);  // connections whose slots A's FIFO cannot lend
  ASSERT_TRUE(d.ok());
  // B reads nothing: A's messages (all by reference) fill the sockets, the
  // connection, then the FIFO.
  uint64_t posted = 0;
  for (int idle = 0; idle < 2000;) {
    if (d.aOut.head() - d.aOut.tail() < kSlots) {
      d.postReference(++posted);
      idle = 0;
    } else {
      ++idle;
    }
    d.a.pump();
  }
  ASSERT_GT(posted, uint64_t(kSlots));
  ASSERT_EQ(d.aOut.head() - d.aOut.tail(), uint64_t(kSlots)) << "the connection never filled";
  const uint64_t m = posted;  // posted, not forwarded
  d.a.receiveInPlace({{d.aIn.view.head, 1, nullptr, kSlotBytes, d.aOut.view.head, m}});
  ASSERT_TRUE(lanePost(d.bOut, 1, kSlotBytes));
  // B sends, still reading nothing (which would let A forward the reference).
  const auto deadline = Clock::now() + 5s;
  while (d.aIn.head() == 0 && Clock::now() < deadline) {
    d.b.pump(false);
    d.a.pump();
  }
  ASSERT_EQ(d.aIn.head(), 1u);
  EXPECT_FALSE(executor::messageByReference(d.aOut.view.sizes[m % kSlots])) << "not copied back";
  std::fill(d.user.begin(), d.user.end(), uint8_t(0));  // what the lane's step now writes there
  uint64_t consumed = 0;
  ASSERT_TRUE(pumpUntil({&d.a, &d.b}, [&] {
    while (consumed < m && d.bIn.head() > consumed) {
      if (consumed + 1 == m) {
        const uint8_t* sent = Duplex::bytesOf(d.bIn, m);
        for (size_t i = 0; i < kSlotBytes; ++i) EXPECT_EQ(sent[i], patternByte(100, i)) << "byte " << i;
      }
      executor::storeRelease(d.bIn.view.tail, ++consumed);
    }
    return consumed == m;
  }));
}

// A reference the connection holds, partly written or not, is copied into
// its slot on detach: changing the bytes after that changes nothing sent.
TEST(TcpSend, ADetachedSlotSendsTheBytesAsTheyWereThen) {
  Pair p = connectPair(Kind::kTcp);
  ASSERT_TRUE(p.send && p.recv);
  std::vector<uint8_t> user(kSlotBytes);
  for (size_t i = 0; i < user.size(); ++i) user[i] = patternByte(7, i);
  ASSERT_NE(p.send->acquire(), nullptr);
  p.send->post(user.size(), 9, user.data());
  p.send->detach(0);
  std::fill(user.begin(), user.end(), uint8_t(0));
  const auto deadline = Clock::now() + 5s;
  size_t bytes = 0;
  uint32_t mark = 0;
  const void* got = nullptr;
  while (got == nullptr && Clock::now() < deadline) {
    ASSERT_TRUE(p.send->progress().ok());
    ASSERT_TRUE(p.recv->progress().ok());
    got = p.recv->peek(&bytes, &mark);
  }
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(bytes, kSlotBytes);
  EXPECT_EQ(mark, 9u);
  for (size_t i = 0; i < kSlotBytes; ++i) ASSERT_EQ(static_cast<const uint8_t*>(got)[i], patternByte(7, i)) << i;
}

// After a failed run the bridge moves nothing: a message by reference would
// read a user buffer that may be gone, a placement write one.
TEST(NetBridge, AnAbandonedBridgeMovesNothing) {
  Bridged b(Kind::kTcp);
  ASSERT_TRUE(b.ok());
  std::vector<char> dst(kSlotBytes, 0);
  b.receiver.receiveInPlace({{b.in.view.head, 2, dst.data(), sizeOf(2), nullptr, 0}});
  b.receiver.abandon(fail(ncclRemoteError, "rank 3 failed"));
  b.sender.abandon(fail(ncclRemoteError, "rank 5 failed"));
  ASSERT_TRUE(lanePost(b.out, 1, sizeOf(1)) && lanePost(b.out, 2, sizeOf(2)));
  for (int i = 0; i < 100; ++i) {
    EXPECT_FALSE(b.sender.pump());
    EXPECT_FALSE(b.receiver.pump());
  }
  EXPECT_EQ(b.in.head(), 0u);
  EXPECT_EQ(dst[0], 0);
  EXPECT_NE(b.sender.error().message().find("rank 5 failed"), std::string::npos) << b.sender.error().message();
}

}  // namespace
}  // namespace lanes
}  // namespace braid
