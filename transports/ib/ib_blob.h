// What a receiver tells its sender to attach an RC queue pair to it: its QP
// address and the ring of slots the sender writes into with RDMA.
#pragma once

#include <cstdint>

#include "core/result.h"
#include "transports/transport.h"

namespace braid {
namespace ib {

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

}  // namespace ib
}  // namespace braid
