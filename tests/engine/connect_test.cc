// src/engine/connect: connectAll makes the connections a group needs, for
// several communicators from one thread, over the real transports their
// ranks select (inproc between ranks of this process; TCP on loopback for a
// byte stream), and awaitSetUpMessage ends a wait on a peer that cannot come.
#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "common/local_comms.h"
#include "engine/comm.h"
#include "engine/connect.h"
#include "transports/tcp/tcp_connection.h"

namespace braid {
namespace {

using braidtest::LocalComms;
using namespace std::chrono_literals;

constexpr int kChannel = 7;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

engine::ConnectionNeed sendNeed(ncclComm* comm, int peer, int channel = kChannel) { return {comm, peer, channel, true}; }
engine::ConnectionNeed recvNeed(ncclComm* comm, int peer, int channel = kChannel) { return {comm, peer, channel, false}; }

transports::SendConnection* sendConn(ncclComm* comm, int peer, int channel = kChannel) {
  auto it = comm->sendConns.find({peer, channel});
  return it == comm->sendConns.end() ? nullptr : it->second.get();
}
transports::RecvConnection* recvConn(ncclComm* comm, int peer, int channel = kChannel) {
  auto it = comm->recvConns.find({peer, channel});
  return it == comm->recvConns.end() ? nullptr : it->second.get();
}

// Sends one slot of `bytes` carrying `tag` and checks it arrives whole;
// empty on success, else what went wrong.
std::string roundTrip(transports::SendConnection* send, transports::RecvConnection* recv, size_t bytes, uint8_t tag) {
  if (!send || !recv) return "missing connection";
  void* slot = send->acquire();
  if (!slot) return "no free slot";
  memset(slot, tag, bytes);
  send->post(bytes);
  const auto deadline = Clock::now() + 5s;
  while (Clock::now() < deadline) {
    Result s = send->progress(), r = recv->progress();
    if (!s.ok() || !r.ok()) return s.message() + r.message();
    size_t got = 0;
    const void* data = recv->peek(&got);
    if (!data) continue;
    if (got != bytes) return "got " + std::to_string(got) + " bytes, want " + std::to_string(bytes);
    for (size_t i = 0; i < got; ++i)
      if (static_cast<const uint8_t*>(data)[i] != tag) return "byte " + std::to_string(i) + " differs";
    recv->release();
    return "";
  }
  return "nothing arrived within 5 s";
}

class Connect : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(comms_.ok()) << comms_.error(); }
  LocalComms comms_{2};
};

// Both ends of a pair from one thread: the receiver's listen, the sender's
// connect and the accept are phases over all needs, so no end waits on the other.
// Connections exist for the network bridge only, so they are byte streams
// even between ranks of one process (whose FIFOs otherwise live in memory).
TEST_F(Connect, BothEndsFromOneThreadOverTcp) {
  Result r = engine::connectAll({sendNeed(comms_[1], 0), recvNeed(comms_[0], 1)});
  ASSERT_TRUE(r.ok()) << r.message();
  transports::SendConnection* send = sendConn(comms_[1], 0);
  transports::RecvConnection* recv = recvConn(comms_[0], 1);
  EXPECT_NE(dynamic_cast<tcp::TcpSend*>(send), nullptr);
  EXPECT_NE(dynamic_cast<tcp::TcpRecv*>(recv), nullptr);
  EXPECT_EQ(roundTrip(send, recv, 1000, 0x5a), "");
  EXPECT_EQ(sendConn(comms_[0], 1), nullptr) << "a connection nobody needed was made";
}

// A group connects only what it lacks: were a met need redone, its
// connection would be replaced under lanes that use it.
TEST_F(Connect, NeedsAlreadyMetAreKept) {
  const std::vector<engine::ConnectionNeed> first = {sendNeed(comms_[0], 1), recvNeed(comms_[1], 0)};
  ASSERT_TRUE(connectAll(first).ok());
  transports::SendConnection* const send = sendConn(comms_[0], 1);
  transports::RecvConnection* const recv = recvConn(comms_[1], 0);
  std::vector<engine::ConnectionNeed> more = first;
  more.push_back(sendNeed(comms_[1], 0, kChannel + 1));
  more.push_back(recvNeed(comms_[0], 1, kChannel + 1));
  Result r = connectAll(more);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(sendConn(comms_[0], 1), send);
  EXPECT_EQ(recvConn(comms_[1], 0), recv);
  EXPECT_EQ(roundTrip(send, recv, 64, 1), "");
  EXPECT_EQ(roundTrip(sendConn(comms_[1], 0, kChannel + 1), recvConn(comms_[0], 1, kChannel + 1), 64, 2), "");
}

// A rank's connection to itself exchanges no message over the bootstrap.
TEST_F(Connect, ConnectionToItself) {
  Result r = engine::connectAll({sendNeed(comms_[0], 0), recvNeed(comms_[0], 0)});
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(roundTrip(sendConn(comms_[0], 0), recvConn(comms_[0], 0), 200, 9), "");
}

TEST(ConnectRing, EveryRankOfAJobFromOneThread) {
  LocalComms comms(3);
  ASSERT_TRUE(comms.ok()) << comms.error();
  std::vector<engine::ConnectionNeed> needs;
  for (int r = 0; r < 3; ++r) {
    needs.push_back(sendNeed(comms[r], (r + 1) % 3));
    needs.push_back(recvNeed(comms[r], (r + 2) % 3));
  }
  Result res = connectAll(needs);
  ASSERT_TRUE(res.ok()) << res.message();
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(roundTrip(sendConn(comms[r], (r + 1) % 3), recvConn(comms[(r + 1) % 3], r), 128, uint8_t(r)), "")
        << "rank " << r << " to rank " << (r + 1) % 3;
}

// What the receiver sends the sender: the transport's index and its blob, in
// a fixed 512-byte message (connect.cc); a bad one comes from a broken peer.
void sendConnectMessage(ncclComm* from, int to, uint32_t transport, uint32_t length) {
  uint8_t msg[512] = {};
  memcpy(msg, &transport, 4);
  memcpy(msg + 4, &length, 4);
  ASSERT_TRUE(from->bootstrap->send(to, bootstrap::kTagConnectBase + kChannel, msg, sizeof msg).ok());
}

TEST_F(Connect, MalformedConnectionMessageIsRefusedNamingThePeer) {
  sendConnectMessage(comms_[1], 0, 99, 0);
  Result r = engine::connectAll({sendNeed(comms_[0], 1)});
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_TRUE(contains(r.message(), "connecting rank 0 to rank 1: rank 1 sent a malformed connection message "
                                    "(transport 99, 0 bytes)"))
      << r.message();
  sendConnectMessage(comms_[1], 0, 0, 600);
  r = engine::connectAll({sendNeed(comms_[0], 1)});
  EXPECT_TRUE(contains(r.message(), "(transport 0, 600 bytes)")) << r.message();
  EXPECT_EQ(sendConn(comms_[0], 1), nullptr);
}

// ---- waits that must end -----------------------------------------------------------

TEST_F(Connect, AbortEndsTheWaitForAPeer) {
  comms_[0]->abortFlag = 1;
  Result r = engine::connectAll({sendNeed(comms_[0], 1)});
  comms_[0]->abortFlag = 0;
  EXPECT_EQ(r.code(), ncclSystemError);
  EXPECT_TRUE(contains(r.message(), "rank 0: communicator aborted while connecting to rank 1")) << r.message();
}

TEST_F(Connect, PeerThatNeverAnswersTimesOutNamingIt) {
  comms_[0]->settings.timeoutSeconds = 0.3;
  Result r = engine::connectAll({sendNeed(comms_[0], 1)});
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_TRUE(contains(r.message(), "connecting rank 0 to rank 1")) << r.message();
  EXPECT_TRUE(contains(r.message(), "timed out waiting for a bootstrap message from rank 1")) << r.message();
}

// A rank that learned of a lost rank tells the others; one waiting for the
// lost rank's blob hears of it instead of waiting for its timeout.
TEST(ConnectNotice, FailureNoticeFromAnotherRankEndsTheWait) {
  LocalComms comms(3);
  ASSERT_TRUE(comms.ok()) << comms.error();
  comms[2]->bootstrap->notifyFailure("rank 1 stopped answering", 1, Clock::now() + 2s);
  Result r = engine::connectAll({sendNeed(comms[0], 1)});
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_TRUE(contains(r.message(), "rank 0: the job lost a rank; rank 2 reports: rank 1 stopped answering"))
      << r.message();
}

TEST_F(Connect, AwaitReturnsOnceTheMessageIsThere) {
  const uint32_t tag = bootstrap::kTagConnectBase + 40;
  const uint64_t value = 0x1234567890abcdefull;
  ASSERT_TRUE(comms_[1]->bootstrap->send(0, tag, &value, sizeof value).ok());
  Result r = engine::awaitSetUpMessage(comms_[0], 1, tag, "test value");
  ASSERT_TRUE(r.ok()) << r.message();
  uint64_t got = 0;
  ASSERT_TRUE(comms_[0]->bootstrap->recv(1, tag, &got, sizeof got, Clock::now() + 1s).ok());
  EXPECT_EQ(got, value);
}

}  // namespace
}  // namespace braid
