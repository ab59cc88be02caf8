// Connect blob round trip and hostile blobs.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "transports/ib/ib_blob.h"

namespace braid {
namespace ib {
namespace {

IbConnInfo sample() {
  IbConnInfo i;
  i.qpn = 0xabcdef;
  i.psn = 0x123456;
  i.lid = 77;
  i.port = 2;
  i.mtu = 5;
  i.linkLayer = 2;
  for (int k = 0; k < 16; ++k) i.gid[k] = static_cast<uint8_t>(0xf0 + k);
  i.ringAddr = 0x7f0012340000ull;
  i.rkey = 0xdeadbeef;
  i.slotBytes = 1 << 19;
  i.nslots = 8;
  for (int k = 0; k < 128; ++k) i.handshakeAddr[k] = static_cast<uint8_t>(k);
  i.nonce = 0x0123456789abcdefull;
  return i;
}

TEST(IbBlob, RoundTrip) {
  const IbConnInfo in = sample();
  const Blob b = encodeIbBlob(in);
  IbConnInfo out;
  Result r = decodeIbBlob(b, "rank 1", &out);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(out.qpn, in.qpn);
  EXPECT_EQ(out.psn, in.psn);
  EXPECT_EQ(out.lid, in.lid);
  EXPECT_EQ(out.port, in.port);
  EXPECT_EQ(out.mtu, in.mtu);
  EXPECT_EQ(out.linkLayer, in.linkLayer);
  EXPECT_EQ(memcmp(out.gid, in.gid, 16), 0);
  EXPECT_EQ(out.ringAddr, in.ringAddr);
  EXPECT_EQ(out.rkey, in.rkey);
  EXPECT_EQ(out.slotBytes, in.slotBytes);
  EXPECT_EQ(out.nslots, in.nslots);
  EXPECT_EQ(memcmp(out.handshakeAddr, in.handshakeAddr, 128), 0);
  EXPECT_EQ(out.nonce, in.nonce);
}

TEST(IbBlob, EveryTruncationAndExtensionRejected) {
  const Blob full = encodeIbBlob(sample());
  for (size_t n = 0; n < full.size(); ++n) {
    Blob cut(full.begin(), full.begin() + n);
    IbConnInfo out;
    EXPECT_EQ(decodeIbBlob(cut, "rank 1", &out).code(), ncclInternalError) << n;
  }
  Blob longer = full;
  longer.push_back(0);
  IbConnInfo out;
  Result r = decodeIbBlob(longer, "rank 1", &out);
  EXPECT_EQ(r.code(), ncclInternalError);
  EXPECT_NE(r.message().find("rank 1"), std::string::npos) << r.message();
}

TEST(IbBlob, BadMagicAndVersion) {
  Blob b = encodeIbBlob(sample());
  b[0] ^= 1;
  IbConnInfo out;
  EXPECT_NE(decodeIbBlob(b, "p", &out).message().find("magic"), std::string::npos);
  b = encodeIbBlob(sample());
  b[4] = 9;  // version follows the 4-byte magic
  Result r = decodeIbBlob(b, "p", &out);
  EXPECT_EQ(r.code(), ncclInternalError);
  EXPECT_NE(r.message().find("version 9"), std::string::npos) << r.message();
}

TEST(IbBlob, InvalidFieldsRejected) {
  struct Case {
    const char* field;
    void (*spoil)(IbConnInfo*);
  };
  const Case cases[] = {
      {"QP number", [](IbConnInfo* i) { i->qpn = 1u << 24; }},
      {"PSN", [](IbConnInfo* i) { i->psn = 0xffffffff; }},
      {"MTU", [](IbConnInfo* i) { i->mtu = 0; }},
      {"MTU", [](IbConnInfo* i) { i->mtu = 6; }},
      {"link layer", [](IbConnInfo* i) { i->linkLayer = 3; }},
      {"port", [](IbConnInfo* i) { i->port = 0; }},
      {"slot count", [](IbConnInfo* i) { i->nslots = 0; }},
      {"slot count", [](IbConnInfo* i) { i->nslots = kMaxIbSlots + 1; }},
      {"slot size", [](IbConnInfo* i) { i->slotBytes = 0; }},
      {"ring address", [](IbConnInfo* i) { i->ringAddr = 0; }},
      {"ring address",
       [](IbConnInfo* i) { i->ringAddr = std::numeric_limits<uint64_t>::max() - 100; }},
  };
  for (const auto& c : cases) {
    IbConnInfo in = sample();
    c.spoil(&in);
    IbConnInfo out;
    Result r = decodeIbBlob(encodeIbBlob(in), "rank 3", &out);
    EXPECT_EQ(r.code(), ncclInternalError) << c.field;
    EXPECT_NE(r.message().find(c.field), std::string::npos) << r.message();
  }
}

TEST(IbBlob, RingEndingExactlyAtTopAccepted) {
  IbConnInfo in = sample();
  in.ringAddr = std::numeric_limits<uint64_t>::max() - uint64_t{in.nslots} * in.slotBytes;
  IbConnInfo out;
  EXPECT_TRUE(decodeIbBlob(encodeIbBlob(in), "p", &out).ok());
}

IbHello sampleHello() {
  IbHello h;
  h.nonce = 0x1122334455667788ull;
  h.qpn = 0x123;
  h.psn = 0xfffff;
  h.lid = 3;
  h.port = 1;
  h.mtu = 4;
  h.linkLayer = 1;
  h.gid[15] = 9;
  h.creditAddr = 0x7f0000001000ull;
  h.creditRkey = 0x80001;
  h.slotBytes = 4096;
  h.nslots = 8;
  h.rank = 5;
  h.channel = 2;
  return h;
}

TEST(IbHello, RoundTripHasFixedSize) {
  const Blob b = encodeIbHello(sampleHello());
  ASSERT_EQ(b.size(), kIbHelloBytes);
  IbHello out;
  Result r = decodeIbHello(b.data(), b.size(), "rank 5", &out);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(out.nonce, 0x1122334455667788ull);
  EXPECT_EQ(out.qpn, 0x123u);
  EXPECT_EQ(out.creditAddr, 0x7f0000001000ull);
  EXPECT_EQ(out.creditRkey, 0x80001u);
  EXPECT_EQ(out.gid[15], 9);
  EXPECT_EQ(out.rank, 5);
  EXPECT_EQ(out.channel, 2);
}

TEST(IbHello, HostileHellosRejected) {
  Blob b = encodeIbHello(sampleHello());
  IbHello out;
  EXPECT_EQ(decodeIbHello(b.data(), b.size() - 1, "p", &out).code(), ncclInternalError);
  b[0] ^= 1;
  EXPECT_EQ(decodeIbHello(b.data(), b.size(), "p", &out).code(), ncclInternalError);
  struct Case {
    const char* field;
    void (*spoil)(IbHello*);
  } cases[] = {
      {"QP number", [](IbHello* h) { h->qpn = 1u << 24; }},
      {"PSN", [](IbHello* h) { h->psn = 1u << 24; }},
      {"MTU", [](IbHello* h) { h->mtu = 0; }},
      {"link layer", [](IbHello* h) { h->linkLayer = 7; }},
      {"port", [](IbHello* h) { h->port = 0; }},
      {"credit address", [](IbHello* h) { h->creditAddr = 0; }},
      {"credit address", [](IbHello* h) { h->creditAddr = 0x1004; }},
  };
  for (const auto& c : cases) {
    IbHello in = sampleHello();
    c.spoil(&in);
    const Blob bad = encodeIbHello(in);
    Result r = decodeIbHello(bad.data(), bad.size(), "rank 5", &out);
    EXPECT_EQ(r.code(), ncclInternalError) << c.field;
    EXPECT_NE(r.message().find(c.field), std::string::npos) << r.message();
    EXPECT_NE(r.message().find("rank 5"), std::string::npos) << r.message();
  }
}

}  // namespace
}  // namespace ib
}  // namespace braid
