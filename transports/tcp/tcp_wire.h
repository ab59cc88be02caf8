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

#include "core/result.h"
#include "transports/transport.h"

namespace braid {
namespace tcp {

constexpr uint64_t kBlobMagic = 0x504354444941524bull;   // "KRAIDTCP"
constexpr uint64_t kHelloMagic = 0x4f4c4c4548444941ull;  // "AIDHELLO"

// Connect blob: where the receiver listens and the nonce the sender must show.
struct BlobContents {
  uint64_t nonce = 0;
  uint64_t slotBytes = 0;
  int32_t nslots = 0;
  sockaddr_storage addr{};
};
Blob encodeBlob(const BlobContents& c);
// Fails on a blob that is not a well-formed TCP blob (magic, positive geometry,
// an IPv4/IPv6 address with a port); `from` names its sender.
Result decodeBlob(const void* data, size_t len, const std::string& from, BlobContents* out);
Result decodeBlob(const Blob& blob, const std::string& from, BlobContents* out);

// First bytes the sender writes on a new connection.
struct Hello {
  uint64_t magic;
  uint64_t nonce;
  uint64_t slotBytes;
  int32_t rank;
  int32_t channel;
  int32_t nslots;
  int32_t pad;
};
static_assert(sizeof(Hello) == 40, "tcp::Hello layout");

// A hello that arrived on the port of the endpoint whose blob carried `nonce`.
// Fails for a stranger (wrong length, magic or nonce) and for impossible
// fields; whether the geometry matches this rank's is the caller's question.
Result decodeHello(const void* data, size_t len, uint64_t nonce, Hello* out);

// Precedes every slot's payload on the stream.
struct FrameHeader {
  uint64_t bytes;  // payload size, <= slotBytes
  uint64_t seq;    // slot sequence number, checked to catch a desynchronised stream
};
static_assert(sizeof(FrameHeader) == 16, "tcp::FrameHeader layout");

// The header of slot `expectSeq` on a connection with `slotBytes`-byte slots;
// `peer` names the sender in the message.
Result decodeFrameHeader(const void* data, size_t len, uint64_t slotBytes, uint64_t expectSeq,
                         const std::string& peer, FrameHeader* out);

}  // namespace tcp
}  // namespace braid
