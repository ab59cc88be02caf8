// What the TCP transport puts in its connect blob and on the wire. Both ends
// run the same braid build, so these are plain structs in host byte order.
// The decoders are pure functions over (bytes, length) that check every field
// before anything is trusted (tests/fuzz/ runs them under libFuzzer): keep them
// free of I/O, logging and global state.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/result.h"
#include "transports/transport.h"

namespace braid::tcp {

constexpr uint64_t kBlobMagic = 0x504354444941524bull;   // "KRAIDTCP"
constexpr uint64_t kHelloMagic = 0x4f4c4c4548444941ull;  // "AIDHELLO"

// Sockets one connection may stripe its slots over (NCCL's cap on
// NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD).
constexpr int kMaxSockets = 64;
// A slot is split only into stripes of at least this many bytes, so small
// slots travel on one socket (one header, one system call).
constexpr uint64_t kMinStripeBytes = 64 << 10;

// Connect blob: where the receiver listens, the nonce the sender must show and
// how many sockets the receiver decided the connection has.
struct BlobContents {
  uint64_t nonce = 0;
  uint64_t slotBytes = 0;
  int32_t nslots = 0;
  int32_t nsockets = 1;
  sockaddr_storage addr{};
};
Blob encodeBlob(const BlobContents& c);
// Fails on a blob that is not a well-formed TCP blob (magic, positive geometry,
// 1..kMaxSockets sockets, an IPv4/IPv6 address with a port); `from` names its
// sender.
Result decodeBlob(const void* data, size_t len, const std::string& from, BlobContents* out);
Result decodeBlob(const Blob& blob, const std::string& from, BlobContents* out);

// First bytes the sender writes on each socket of a new connection.
struct Hello {
  uint64_t magic;
  uint64_t nonce;
  uint64_t slotBytes;
  int32_t rank;
  int32_t channel;
  int32_t nslots;
  int32_t nsockets;     // sockets of this connection (the blob's count)
  int32_t socketIndex;  // which of them this is, 0..nsockets-1
  int32_t pad;
};
static_assert(sizeof(Hello) == 48, "tcp::Hello layout");

// A hello that arrived on the port of the endpoint whose blob carried `nonce`.
// Fails for a stranger (wrong length, magic or nonce) and for impossible
// fields (a socket index outside 0..nsockets-1, nsockets outside
// 1..kMaxSockets); whether the geometry and socket count match this rank's is
// the caller's question.
Result decodeHello(const void* data, size_t len, uint64_t nonce, Hello* out);

// Precedes a slot's payload on the stream: on a connection of several
// sockets, each socket that carries a stripe of the slot sends this header
// (with the whole slot's size) and then its stripe.
struct FrameHeader {
  uint32_t bytes;  // payload size of the whole slot, <= slotBytes (< 4 GiB)
  uint32_t mark;   // the sender's mark of the slot (SendConnection::post)
  uint64_t seq;    // slot sequence number, checked to catch a desynchronised stream
};
static_assert(sizeof(FrameHeader) == 16, "tcp::FrameHeader layout");

// The header of slot `expectSeq` on a connection with `slotBytes`-byte slots;
// `peer` names the sender in the message.
Result decodeFrameHeader(const void* data, size_t len, uint64_t slotBytes, uint64_t expectSeq,
                         const std::string& peer, FrameHeader* out);

// The header of slot `expectSeq` on a socket other than the first: as
// decodeFrameHeader, and its size must be `expectBytes`, the size the first
// socket announced for that slot (else the stripes would not fit together).
Result decodeStripeHeader(const void* data, size_t len, uint64_t slotBytes, uint64_t expectSeq,
                          uint64_t expectBytes, const std::string& peer, FrameHeader* out);

// Striping: a slot of `bytes` on `nsockets` sockets is cut into
// stripeCount() = min(nsockets, bytes / kMinStripeBytes) (at least 1)
// contiguous stripes: equal shares rounded down to 64 bytes, the last taking
// the rest, so each is at least kMinStripeBytes - 63 bytes and a slot under
// twice kMinStripeBytes is one stripe. Stripe i travels on socket i. Pure
// arithmetic, identical on both ends: the receiver derives where each
// socket's bytes go from the size in the first header.
struct Stripe {
  uint64_t offset;
  uint64_t bytes;
};
int stripeCount(uint64_t bytes, int nsockets);
// Stripe `index` (< stripeCount(bytes, nsockets)); never empty unless bytes == 0.
// An index past the last gives an empty stripe at the end.
Stripe stripeOf(uint64_t bytes, int nsockets, int index);

}  // namespace braid::tcp
