// What a receiver tells its sender to attach an RC queue pair to it: its QP
// address and the ring of slots the sender writes into with RDMA.
#pragma once

#include <cstdint>
#include <cstring>

#include "base/result.h"
#include "transports/transport.h"

namespace braid::ib {

constexpr uint32_t kIbBlobMagic = 0x42524942;  // "BRIB"
constexpr uint16_t kIbBlobVersion = 1;
constexpr uint32_t kMaxIbSlots = 1u << 16;

struct IbConnInfo {
  uint32_t qpn = 0;  // 24 bits
  uint32_t psn = 0;  // 24 bits
  uint16_t lid = 0;  // InfiniBand only; 0 on RoCE
  uint8_t port = 0;
  uint8_t mtu = 0;        // IbvMtu (1..5): the smaller of the two ends is used
  uint8_t linkLayer = 0;  // IbvLinkLayer
  uint8_t gid[16] = {};
  uint64_t ringAddr = 0;  // receiver's slot ring, registered for remote write
  uint32_t rkey = 0;
  uint32_t slotBytes = 0;
  uint32_t nslots = 0;
  // The connect blob only travels receiver -> sender, but the receiver's QP also
  // needs the sender's QP number: the sender returns it over a socket at this
  // address (sockaddr_storage bytes), proving itself with the nonce.
  uint8_t handshakeAddr[128] = {};
  uint64_t nonce = 0;
};

Blob encodeIbBlob(const IbConnInfo& info);

// Rejects (ncclInternalError naming `peer`) wrong magic or version, short or
// trailing bytes, QPN/PSN over 24 bits, an MTU outside 1..5, an unknown link
// layer, zero or too many slots, and a ring whose size or end overflows.
Result decodeIbBlob(const Blob& blob, const char* peer, IbConnInfo* out);

// The sender's answer over the handshake socket: its QP address and the word
// the receiver writes credits into. Fixed size (kIbHelloBytes), so the
// receiver reads exactly that much.
constexpr uint32_t kIbHelloMagic = 0x48524942;  // "BRIH"

struct IbHello {
  uint64_t nonce = 0;  // the receiver's blob nonce: proves the sender read the blob
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  uint8_t port = 0;
  uint8_t mtu = 0;
  uint8_t linkLayer = 0;
  uint8_t gid[16] = {};
  uint64_t creditAddr = 0;  // 8-byte word, registered for remote write
  uint32_t creditRkey = 0;
  uint32_t slotBytes = 0;  // must equal the receiver's
  uint32_t nslots = 0;
  int32_t rank = 0;  // the sender's, for messages
  int32_t channel = 0;
};

constexpr size_t kIbHelloBytes = 4 + 2 + 8 + 4 + 4 + 2 + 1 + 1 + 1 + 16 + 8 + 4 + 4 + 4 + 4 + 4;

// Copies the QP address (qpn, psn, lid, port, mtu, link layer, gid) between the
// blob's and the hello's structs, which name those fields alike.
template <class From, class To>
void copyQpAddress(const From& from, To* to) {
  to->qpn = from.qpn;
  to->psn = from.psn;
  to->lid = from.lid;
  to->port = from.port;
  to->mtu = from.mtu;
  to->linkLayer = from.linkLayer;
  std::memcpy(to->gid, from.gid, sizeof(to->gid));
}

Blob encodeIbHello(const IbHello& hello);

// Rejects what decodeIbBlob rejects in the same fields, plus a zero or
// misaligned credit address; ncclInternalError naming `peer`. The nonce is
// returned, not checked: the caller compares it.
Result decodeIbHello(const uint8_t* bytes, size_t size, const char* peer, IbHello* out);

}  // namespace braid::ib
