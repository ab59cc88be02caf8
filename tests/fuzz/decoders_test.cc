// The network decoders on hand-made hostile inputs (runs with any compiler;
// the libFuzzer targets next to this file search for the inputs nobody wrote).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <climits>
#include <cstring>
#include <vector>

#include "base/socket.h"
#include "bootstrap/wire.h"
#include "transports/tcp/tcp_wire.h"

namespace braid {
namespace {

constexpr uint64_t kMagic = 0x1122334455667788ull;

sockaddr_storage v4(uint16_t port) {
  sockaddr_storage a{};
  auto& in = reinterpret_cast<sockaddr_in&>(a);
  in.sin_family = AF_INET;
  in.sin_port = htons(port);
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

template <class T>
std::vector<uint8_t> bytesOf(const T& v) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
  return std::vector<uint8_t>(p, p + sizeof(T));
}

void expectRefused(const Result& r, const char* mentions) {
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.message().find(mentions), std::string::npos) << r.message();
}

bootstrap::Hello validHello(int rank, int nranks) {
  bootstrap::Hello h{};
  h.magic = kMagic;
  h.kind = bootstrap::kHelloCheckIn;
  h.rank = rank;
  h.nranks = nranks;
  packAddr(v4(4000), &h.addr);
  return h;
}

TEST(Decoders, AddressNeedsAFamilyItsBytesAndAPort) {
  sockaddr_storage out;
  sockaddr_storage a = v4(80);
  EXPECT_TRUE(bootstrap::decodeAddr(&a, sizeof(sockaddr_in), &out).ok());
  expectRefused(bootstrap::decodeAddr(&a, 1, &out), "too short");
  expectRefused(bootstrap::decodeAddr(&a, sizeof(sockaddr_in) - 1, &out), "truncated");
  a = v4(0);
  expectRefused(bootstrap::decodeAddr(&a, sizeof(a), &out), "no port");
  a.ss_family = AF_UNIX;
  expectRefused(bootstrap::decodeAddr(&a, sizeof(a), &out), "family");
  expectRefused(bootstrap::decodeAddr(nullptr, 0, &out), "too short");
}

TEST(Decoders, UniqueId) {
  bootstrap::UniqueIdContents c{};
  c.version = bootstrap::kUniqueIdVersion;
  c.flags = bootstrap::kIdRootRunning;
  c.magic = kMagic;
  packAddr(v4(1234), &c.root);
  ncclUniqueId id;
  encodeUniqueId(c, &id);
  bootstrap::UniqueIdContents out;
  ASSERT_TRUE(decodeUniqueIdBytes(&id, sizeof(id), &out).ok());
  EXPECT_EQ(out.magic, kMagic);
  expectRefused(decodeUniqueIdBytes(&id, sizeof(id) - 1, &out), "bytes");
  ncclUniqueId bad = id;
  bad.internal[0] ^= 1;
  expectRefused(decodeUniqueId(bad, &out), "not made by braid");
  c.flags = 0x80;
  encodeUniqueId(c, &bad);
  expectRefused(decodeUniqueId(bad, &out), "unknown flags");
  c.flags = 0;
  c.magic = 0;
  encodeUniqueId(c, &bad);
  expectRefused(decodeUniqueId(bad, &out), "no magic");
}

TEST(Decoders, RootHello) {
  bootstrap::HelloMessage m;
  bootstrap::Hello h = validHello(2, 4);
  ASSERT_TRUE(decodeHello(&h, sizeof(h), kMagic, 0, &m).ok());
  EXPECT_EQ(m.rank, 2);
  EXPECT_EQ(m.nranks, 4);
  EXPECT_EQ(addrPort(m.addr), 4000);
  expectRefused(decodeHello(&h, sizeof(h) - 1, kMagic, 0, &m), "truncated");
  expectRefused(decodeHello(&h, sizeof(h), kMagic ^ 1, 0, &m), "magic differs");
  expectRefused(decodeHello(&h, sizeof(h), kMagic, 8, &m), "the job has 8 ranks");
  h.nranks = INT_MAX;
  expectRefused(decodeHello(&h, sizeof(h), kMagic, 0, &m), "nranks=2147483647");
  h = validHello(4, 4);
  expectRefused(decodeHello(&h, sizeof(h), kMagic, 0, &m), "outside [0, 4)");
  h = validHello(-1, 4);
  expectRefused(decodeHello(&h, sizeof(h), kMagic, 0, &m), "outside [0, 4)");
  h = validHello(1, 4);
  h.kind = 7;
  expectRefused(decodeHello(&h, sizeof(h), kMagic, 0, &m), "unknown kind");
  h = validHello(1, 4);
  memset(&h.addr, 0, sizeof(h.addr));
  expectRefused(decodeHello(&h, sizeof(h), kMagic, 0, &m), "listening address");
}

TEST(Decoders, RootReplyAndItsPayloads) {
  bootstrap::RootReply r{kMagic, bootstrap::kReplyTable, 3}, out;
  ASSERT_TRUE(decodeRootReply(&r, sizeof(r), kMagic, 3, &out).ok());
  EXPECT_EQ(rootReplyPayloadBytes(out), 3 * sizeof(bootstrap::WireAddr));
  expectRefused(decodeRootReply(&r, sizeof(r), kMagic, 4, &out), "table of 3 ranks");
  expectRefused(decodeRootReply(&r, sizeof(r), kMagic + 1, 3, &out), "wrong magic");
  r = {kMagic, bootstrap::kReplyMissing, UINT32_MAX};
  expectRefused(decodeRootReply(&r, sizeof(r), kMagic, 3, &out), "corrupt status");
  r = {kMagic, 99, 0};
  expectRefused(decodeRootReply(&r, sizeof(r), kMagic, 3, &out), "unknown reply");

  std::vector<bootstrap::WireAddr> table(3);
  for (auto& w : table) packAddr(v4(5000), &w);
  std::vector<sockaddr_storage> addrs;
  EXPECT_TRUE(decodeAddressTable(table.data(), 3 * sizeof(bootstrap::WireAddr), 3, &addrs).ok());
  EXPECT_EQ(addrs.size(), 3u);
  expectRefused(decodeAddressTable(table.data(), 2 * sizeof(bootstrap::WireAddr), 3, &addrs), "must be");
  memset(&table[1], 0, sizeof(bootstrap::WireAddr));
  expectRefused(decodeAddressTable(table.data(), 3 * sizeof(bootstrap::WireAddr), 3, &addrs), "rank 1");

  bootstrap::MissingRanks miss;
  const int32_t ok[] = {0, -3};  // rank 0 never came, rank 2 came and left
  ASSERT_TRUE(decodeMissingRanks(ok, sizeof(ok), 3, &miss).ok());
  EXPECT_EQ(miss.never, std::vector<int>{0});
  EXPECT_EQ(miss.left, std::vector<int>{2});
  const int32_t minInt[] = {INT32_MIN};
  expectRefused(decodeMissingRanks(minInt, sizeof(minInt), 3, &miss), "rank 2147483647");
  const int32_t twice[] = {1, -2};
  expectRefused(decodeMissingRanks(twice, sizeof(twice), 3, &miss), "twice");
  expectRefused(decodeMissingRanks(ok, 5, 3, &miss), "5 bytes");
  EXPECT_TRUE(decodeMissingRanks(nullptr, 0, 3, &miss).ok());
}

TEST(Decoders, PointToPointHeaders) {
  bootstrap::ConnHeader c{kMagic, 2, 0}, cout;
  EXPECT_TRUE(decodeConnHeader(&c, sizeof(c), kMagic, 0, 4, &cout).ok());
  expectRefused(decodeConnHeader(&c, sizeof(c), kMagic, 2, 4, &cout), "claims to be rank 2");
  expectRefused(decodeConnHeader(&c, sizeof(c), kMagic, 0, 2, &cout), "claims to be rank 2");
  expectRefused(decodeConnHeader(&c, sizeof(c), kMagic ^ 4, 0, 4, &cout), "wrong magic");
  expectRefused(decodeConnHeader(&c, 15, kMagic, 0, 4, &cout), "truncated");

  bootstrap::FrameHeader f{bootstrap::frameCheck(kMagic), 9, 100}, fout;
  EXPECT_TRUE(decodeFrameHeader(&f, sizeof(f), kMagic, &fout).ok());
  expectRefused(decodeFrameHeader(&f, sizeof(f), kMagic + 1, &fout), "frame check");
  f.size = bootstrap::kMaxMessageBytes + 1;
  expectRefused(decodeFrameHeader(&f, sizeof(f), kMagic, &fout), "exceeds");
  expectRefused(decodeFrameHeader(&f, sizeof(f) + 1, kMagic, &fout), "too long");
}

TEST(Decoders, TcpBlobHelloAndFrames) {
  tcp::BlobContents c{77, 4096, 8, 4, v4(6000)}, out;
  Blob b = tcp::encodeBlob(c);
  ASSERT_TRUE(tcp::decodeBlob(b, "peer", &out).ok());
  EXPECT_EQ(out.nonce, 77u);
  EXPECT_EQ(out.nsockets, 4);
  expectRefused(tcp::decodeBlob(b.data(), b.size() - 1, "peer", &out), "bytes");
  Blob bad = tcp::encodeBlob({77, 0, 8, 1, v4(6000)});
  expectRefused(tcp::decodeBlob(bad, "peer", &out), "slots");
  bad = tcp::encodeBlob({77, 4096, 8, 1, v4(0)});
  expectRefused(tcp::decodeBlob(bad, "peer", &out), "port");
  bad = tcp::encodeBlob({77, 4096, 8, 0, v4(6000)});
  expectRefused(tcp::decodeBlob(bad, "peer", &out), "0 sockets");
  bad = tcp::encodeBlob({77, 4096, 8, tcp::kMaxSockets + 1, v4(6000)});
  expectRefused(tcp::decodeBlob(bad, "peer", &out), "65 sockets");
  bad = b;
  bad[0] ^= 1;
  expectRefused(tcp::decodeBlob(bad, "peer", &out), "wrong magic");

  tcp::Hello h{tcp::kHelloMagic, 77, 4096, 1, 0, 8, 2, 1, 0}, hout;
  EXPECT_TRUE(tcp::decodeHello(&h, sizeof(h), 77, &hout).ok());
  expectRefused(tcp::decodeHello(&h, sizeof(h), 78, &hout), "wrong nonce");
  expectRefused(tcp::decodeHello(&h, 20, 77, &hout), "20 bytes");
  h.socketIndex = 2;
  expectRefused(tcp::decodeHello(&h, sizeof(h), 77, &hout), "socket 2 of 2");
  h.socketIndex = -1;
  expectRefused(tcp::decodeHello(&h, sizeof(h), 77, &hout), "socket -1 of 2");
  h.socketIndex = 0;
  h.nsockets = 0;
  expectRefused(tcp::decodeHello(&h, sizeof(h), 77, &hout), "socket 0 of 0");
  h.nsockets = tcp::kMaxSockets + 1;
  expectRefused(tcp::decodeHello(&h, sizeof(h), 77, &hout), "of 65");
  h.nsockets = 1;
  h.nslots = -1;
  expectRefused(tcp::decodeHello(&h, sizeof(h), 77, &hout), "impossible");

  tcp::FrameHeader f{4096, 0, 3}, fout;
  EXPECT_TRUE(tcp::decodeFrameHeader(&f, sizeof(f), 4096, 3, "peer", &fout).ok());
  expectRefused(tcp::decodeFrameHeader(&f, sizeof(f), 4095, 3, "peer", &fout), "larger than");
  expectRefused(tcp::decodeFrameHeader(&f, sizeof(f), 4096, 4, "peer", &fout), "expected");
  f.bytes = ~0u;
  expectRefused(tcp::decodeFrameHeader(&f, sizeof(f), 4096, 3, "peer", &fout), "larger than");

  // A stripe header must repeat the size socket 0 announced.
  f = {4000, 0, 3};
  EXPECT_TRUE(tcp::decodeStripeHeader(&f, sizeof(f), 4096, 3, 4000, "peer", &fout).ok());
  expectRefused(tcp::decodeStripeHeader(&f, sizeof(f), 4096, 3, 4001, "peer", &fout),
                "on another");
  expectRefused(tcp::decodeStripeHeader(&f, sizeof(f), 4096, 2, 4000, "peer", &fout), "expected");
  expectRefused(tcp::decodeStripeHeader(&f, 15, 4096, 3, 4000, "peer", &fout), "15 bytes");
}

// The stripes of a slot tile it exactly, in order, none (but a lone one) more
// than 63 bytes under kMinStripeBytes, whatever the size and socket count.
TEST(Decoders, TcpStripesTileTheSlot) {
  const uint64_t m = tcp::kMinStripeBytes;
  const uint64_t sizes[] = {0, 1, m - 1, m, 2 * m - 1, 2 * m, 2 * m + 1, 3 * m + 17,
                            4 * m, 512 << 10, (512 << 10) + 3, 64 * m - 1, 64 * m + 999,
                            1ull << 30};
  for (int n = 1; n <= tcp::kMaxSockets; ++n) {
    for (uint64_t bytes : sizes) {
      int count = tcp::stripeCount(bytes, n);
      ASSERT_GE(count, 1);
      ASSERT_LE(count, n);
      if (bytes < 2 * m) {
        EXPECT_EQ(count, 1) << bytes;
      }
      uint64_t next = 0;
      for (int i = 0; i < count; ++i) {
        tcp::Stripe s = tcp::stripeOf(bytes, n, i);
        ASSERT_EQ(s.offset, next) << "bytes " << bytes << " sockets " << n << " stripe " << i;
        if (count > 1) {
          EXPECT_GE(s.bytes + 63, m) << "bytes " << bytes << " sockets " << n << " stripe " << i;
          EXPECT_EQ(s.offset % 64, 0u);
        }
        next = s.offset + s.bytes;
      }
      EXPECT_EQ(next, bytes) << "sockets " << n;
    }
  }
  EXPECT_EQ(tcp::stripeCount(4 * m, 4), 4);
  EXPECT_EQ(tcp::stripeCount(4 * m, 2), 2);
  EXPECT_EQ(tcp::stripeCount(3 * m, 4), 3);
}

}  // namespace
}  // namespace braid
