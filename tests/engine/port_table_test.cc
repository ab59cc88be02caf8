// src/engine/lanes/port_table: where each lane FIFO of a rank lives, per
// peer. Ranks of one process share heap FIFOs; ranks of one host in other
// processes share a /dev/shm segment; a peer whose memory is out of reach
// (NCCL_SHM_DISABLE=1, or another host) gets a FIFO on each end, bridged over
// a TCP connection of its own, which its LL and bulk messages share. Real
// communicators: ranks as threads of this process, or as forked processes
// (tests/common/mp_harness.h).
#include <gtest/gtest.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/local_comms.h"
#include "common/mp_harness.h"
#include "engine/comm.h"
#include "engine/connect.h"
#include "engine/lanes/comm_program.h"
#include "engine/lanes/port_table.h"

namespace braid {
namespace lanes {
namespace {

using namespace std::chrono_literals;

PortKey portKey(int peer, bool send, executor::Protocol protocol = executor::Protocol::Bulk, int channel = 0) {
  PortKey k;
  k.peer = peer;
  k.channel = channel;
  k.send = send;
  k.protocol = protocol;
  return k;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ---- ranks of this process --------------------------------------------------------

class PortTableInProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(comms_.ok()) << comms_.error();
    for (int r = 0; r < 2; ++r) tables_.push_back(std::make_unique<PortTable>(makeHostLaneMemory()));
  }
  // Rank 1 sends to rank 0 on every key's twin: offers, then accepts, for
  // both ranks from this thread (as one thread driving ncclCommInitAll does).
  Result connect(const std::vector<PortKey>& rank0Keys, const std::vector<PortKey>& rank1Keys) {
    BRAID_TRY(tables_[0]->offer(comms_[0], rank0Keys, limitsOf(comms_[0])));
    BRAID_TRY(tables_[1]->offer(comms_[1], rank1Keys, limitsOf(comms_[1])));
    BRAID_TRY(tables_[0]->accept(comms_[0], rank0Keys, limitsOf(comms_[0])));
    return tables_[1]->accept(comms_[1], rank1Keys, limitsOf(comms_[1]));
  }
  braidtest::LocalComms comms_{2};
  std::vector<std::unique_ptr<PortTable>> tables_;
};

TEST_F(PortTableInProcess, BothEndsOfAFifoShareOneHeapFifo) {
  const PortKey in = portKey(1, false), out = portKey(0, true);
  Result r = connect({in}, {out});
  ASSERT_TRUE(r.ok()) << r.message();
  executor::Port* receiver = tables_[0]->port(in);
  executor::Port* sender = tables_[1]->port(out);
  ASSERT_NE(receiver, nullptr);
  ASSERT_NE(sender, nullptr);
  EXPECT_NE(receiver, sender) << "each end has a port (message count) of its own";
  EXPECT_EQ(receiver->fifo.head, sender->fifo.head) << "the ends do not share the FIFO's memory";
  EXPECT_EQ(receiver->fifo.slots, sender->fifo.slots);
  EXPECT_EQ(receiver->fifo.protocol, executor::Protocol::Bulk);
  EXPECT_EQ(receiver->fifo.nslots, uint32_t(comms_[0]->settings.nslots));
  EXPECT_EQ(receiver->fifo.payloadBytes, limitsOf(comms_[0]).channelPayloadBytes);
  EXPECT_FALSE(tables_[0]->isRemote(comms_[0], in));
  EXPECT_TRUE(tables_[1]->bridgeNeeds(comms_[1], {out}).empty());
  EXPECT_EQ(tables_[1]->bridge(), nullptr);
  EXPECT_TRUE(PortTable::reachable(comms_[0]));
}

// In shared memory each protocol keeps a FIFO of its own, its slots sized
// for it: LL lines, and per-peer FIFOs with the per-peer slot.
TEST_F(PortTableInProcess, EachProtocolAndThePeerChannelGetTheirOwnFifo) {
  const PortKey bulkIn = portKey(1, false), llIn = portKey(1, false, executor::Protocol::LL),
                peerIn = portKey(1, false, executor::Protocol::Bulk, schedule::kPeerChannel);
  const std::vector<PortKey> rank0 = {bulkIn, llIn, peerIn};
  const std::vector<PortKey> rank1 = {portKey(0, true), portKey(0, true, executor::Protocol::LL),
                                      portKey(0, true, executor::Protocol::Bulk, schedule::kPeerChannel)};
  Result r = connect(rank0, rank1);
  ASSERT_TRUE(r.ok()) << r.message();
  const LaneLimits limits = limitsOf(comms_[0]);
  executor::Port* bulk = tables_[0]->port(bulkIn);
  executor::Port* ll = tables_[0]->port(llIn);
  executor::Port* peer = tables_[0]->port(peerIn);
  ASSERT_TRUE(bulk && ll && peer);
  EXPECT_EQ(ll->fifo.protocol, executor::Protocol::LL);
  EXPECT_EQ(ll->fifo.payloadBytes, limits.llPayloadBytes);
  EXPECT_EQ(peer->fifo.payloadBytes, limits.peerPayloadBytes);
  std::set<uint64_t*> heads = {bulk->fifo.head, ll->fifo.head, peer->fifo.head};
  EXPECT_EQ(heads.size(), 3u) << "two FIFOs share memory";
  EXPECT_EQ(tables_[1]->port(rank1[1])->fifo.head, ll->fifo.head);
  EXPECT_EQ(tables_[1]->port(rank1[2])->fifo.head, peer->fifo.head);
}

// A later group continues on the FIFOs of earlier ones: its ports keep their
// message counts. Making them again would also leave the peer's blob unread.
TEST_F(PortTableInProcess, FifosAreMadeOnceAndKept) {
  const PortKey in = portKey(1, false), out = portKey(0, true);
  ASSERT_TRUE(connect({in}, {out}).ok());
  executor::Port* receiver = tables_[0]->port(in);
  receiver->seq = 17;
  const PortKey in2 = portKey(1, false, executor::Protocol::Bulk, 1), out2 = portKey(0, true, executor::Protocol::Bulk, 1);
  Result r = connect({in, in2}, {out, out2});
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(tables_[0]->port(in), receiver);
  EXPECT_EQ(receiver->seq, 17u);
  ASSERT_NE(tables_[0]->port(in2), nullptr);
  EXPECT_EQ(tables_[0]->port(in2)->fifo.head, tables_[1]->port(out2)->fifo.head);
}

TEST_F(PortTableInProcess, SenderWhosePeerNeverOffersTimesOutNamingTheFifo) {
  comms_[1]->settings.timeoutSeconds = 0.3;
  Result r = tables_[1]->accept(comms_[1], {portKey(0, true, executor::Protocol::LL, 2)}, limitsOf(comms_[1]));
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_TRUE(contains(r.message(), "rank 1: lane FIFO to rank 0")) << r.message();
  EXPECT_TRUE(contains(r.message(), "timed out")) << r.message();
  EXPECT_EQ(tables_[1]->port(portKey(0, true, executor::Protocol::LL, 2)), nullptr);
}

// Blob sizes come off the wire and bound an allocation.
TEST_F(PortTableInProcess, OversizedBlobIsRefused) {
  const uint32_t length = 5000;
  ASSERT_TRUE(comms_[0]->bootstrap->send(1, bootstrap::kTagLaneFifo, &length, sizeof length).ok());
  Result r = tables_[1]->accept(comms_[1], {portKey(0, true)}, limitsOf(comms_[1]));
  EXPECT_EQ(r.code(), ncclInternalError);
  EXPECT_TRUE(contains(r.message(), "rank 0 sent a lane FIFO blob of 5000 bytes")) << r.message();
}

// Every bridged FIFO has a connection of its own, on a channel no plan uses.
TEST(PortTableBridgeChannel, OnePerChannelAndProtocolPastThePlansChannels) {
  std::set<int> seen;
  for (int channel : {0, 1, 2, 31, schedule::kPeerChannel})
    for (executor::Protocol p : {executor::Protocol::Bulk, executor::Protocol::LL})
      for (bool send : {false, true}) {
        const int c = PortTable::bridgeChannel(portKey(3, send, p, channel));
        EXPECT_GT(c, schedule::kPeerChannel) << "channel " << channel;
        EXPECT_EQ(c, PortTable::bridgeChannel(portKey(5, !send, p, channel))) << "both ends must agree";
        if (send) seen.insert(c);
      }
  EXPECT_EQ(seen.size(), 10u) << "two FIFOs share a bridge connection";
}

// ---- ranks in two processes --------------------------------------------------------

// Rank 1 sends to rank 0 on channel 0 with both protocols, through a table of
// its own; each rank checks where the FIFOs went, then rank 1 posts one bulk
// message which rank 0 must find in its FIFO.
struct Placement {
  bool remote;     // bridged over the network
  bool reachable;  // PortTable::reachable: one host and /dev/shm
};

constexpr size_t kMessageBytes = 3000;

uint8_t messageByte(size_t i) { return uint8_t(i * 7 + 3); }

void postOne(executor::Port* port) {
  const executor::FifoView& f = port->fifo;
  for (size_t i = 0; i < kMessageBytes; ++i) reinterpret_cast<uint8_t*>(f.slot(1))[i] = messageByte(i);
  f.sizes[1 % f.nslots] = kMessageBytes;
  executor::storeRelease(f.head, 1);
}

// Pumps the bridge (if any) until done() or 5 s passed.
bool pumpUntil(const PortTable& table, const std::function<bool()>& done) {
  const auto deadline = Clock::now() + 5s;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    if (table.bridge()) table.bridge()->pump();
  }
  return true;
}

void twoProcessRank(int rank, int nranks, const ncclUniqueId& id, const Placement& want, bool twoHosts) {
  if (twoHosts) setenv("BRAID_HOSTID", rank == 0 ? "port-table-host-a" : "port-table-host-b", 1);
  ncclComm_t comm = nullptr;
  MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
  const int peer = 1 - rank;
  const bool send = rank == 1;
  const PortKey bulk = portKey(peer, send), ll = portKey(peer, send, executor::Protocol::LL);
  const std::vector<PortKey> keys = {bulk, ll};
  const LaneLimits limits = limitsOf(comm);
  auto table = std::make_unique<PortTable>(makeHostLaneMemory());
  MP_EXPECT(PortTable::reachable(comm) == want.reachable, "rank %d: reachable() is %d", rank,
            int(PortTable::reachable(comm)));
  MP_EXPECT(table->isRemote(comm, bulk) == want.remote && table->isRemote(comm, ll) == want.remote,
            "rank %d: isRemote is %d for bulk, %d for LL", rank, int(table->isRemote(comm, bulk)),
            int(table->isRemote(comm, ll)));

  Result r = table->offer(comm, keys, limits);
  if (r.ok()) r = table->accept(comm, keys, limits);
  MP_CHECK(r.ok(), "rank %d: offer/accept: %s", rank, r.message().c_str());
  const std::vector<engine::ConnectionNeed> needs = table->bridgeNeeds(comm, keys);
  if (want.remote) {
    MP_EXPECT(table->port(bulk) == nullptr, "rank %d: a remote FIFO was put in shared memory", rank);
    // LL and bulk messages share one bulk FIFO, hence one connection.
    MP_CHECK(needs.size() == 1, "rank %d: %zu bridge connections for the two keys", rank, needs.size());
    MP_EXPECT(needs[0].peer == peer && needs[0].send == send &&
                  needs[0].channel == PortTable::bridgeChannel(bulk),
              "rank %d: bridge need peer %d channel %d send %d", rank, needs[0].peer, needs[0].channel,
              int(needs[0].send));
  } else {
    MP_EXPECT(needs.empty(), "rank %d: %zu bridge connections for shared memory", rank, needs.size());
  }
  r = connectAll(needs);
  if (r.ok()) r = table->attachBridged(comm, keys, limits);
  MP_CHECK(r.ok(), "rank %d: bridging: %s", rank, r.message().c_str());

  executor::Port* port = table->port(bulk);
  MP_CHECK(port != nullptr && table->port(ll) != nullptr, "rank %d: a key has no port", rank);
  MP_EXPECT((table->bridge() != nullptr) == want.remote, "rank %d: bridge() is %p", rank,
            static_cast<void*>(table->bridge()));
  if (want.remote) {
    MP_EXPECT(table->port(ll) == port, "rank %d: a bridged LL key has a FIFO of its own", rank);
    MP_EXPECT(port->fifo.protocol == executor::Protocol::Bulk, "rank %d: the bridged FIFO is not bulk", rank);
  } else {
    MP_EXPECT(table->port(ll) != port && table->port(ll)->fifo.protocol == executor::Protocol::LL,
              "rank %d: the LL key does not have an LL FIFO of its own", rank);
  }

  if (send) {
    postOne(port);
    MP_EXPECT(pumpUntil(*table, [&] { return !table->bridge() || table->bridge()->flushed(); }),
              "rank 1: the message never left");
  } else {
    MP_EXPECT(pumpUntil(*table, [&] { return executor::loadAcquire(port->fifo.head) == 1; }),
              "rank 0: the message never arrived");
    const uint8_t* slot = reinterpret_cast<const uint8_t*>(port->fifo.slot(1));
    MP_EXPECT(port->fifo.sizes[1 % port->fifo.nslots] == kMessageBytes, "rank 0: message of %llu bytes",
              static_cast<unsigned long long>(port->fifo.sizes[1 % port->fifo.nslots]));
    size_t wrong = 0;
    for (size_t i = 0; i < kMessageBytes; ++i) wrong += slot[i] != messageByte(i);
    MP_EXPECT(wrong == 0, "rank 0: %zu bytes of the message differ", wrong);
  }
  // The sender stays until the receiver has its message.
  MP_CHECK(comm->bootstrap->barrier(Clock::now() + 10s).ok(), "rank %d: final barrier", rank);
  table.reset();  // its bridge uses the communicator's connections
  MP_NCCL_CHECK(ncclCommDestroy(comm));
}

void runTwoProcesses(const char* shmDisable, const Placement& want, bool twoHosts) {
  mptest::RankOptions o;
  o.timeoutSeconds = 30;
  o.env = {{"NCCL_SHM_DISABLE", shmDisable}, {"BRAID_TIMEOUT", "10"}};
  mptest::runRanks(
      2, [want, twoHosts](int rank, int nranks, const ncclUniqueId& id) { twoProcessRank(rank, nranks, id, want, twoHosts); },
      o);
}

TEST(PortTableTwoProcesses, SameHostSharesAShmFifoPerProtocol) {
  runTwoProcesses("0", Placement{false, true}, false);
}

// NCCL_SHM_DISABLE=1 takes away the transport that shares memory: the FIFO
// is bridged though the ranks could still map one segment.
TEST(PortTableTwoProcesses, WithoutShmTheFifoIsBridgedOverTcp) {
  runTwoProcesses("1", Placement{true, true}, false);
}

TEST(PortTableTwoProcesses, OtherHostIsBridgedOverTcp) {
  runTwoProcesses("0", Placement{true, false}, true);
}

}  // namespace
}  // namespace lanes
}  // namespace braid
