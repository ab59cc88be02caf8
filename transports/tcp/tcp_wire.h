// What the TCP transport puts in its connect blob and on the wire. Both ends
// run the same braid build, so these are plain structs in host byte order.
#pragma once

#include <sys/socket.h>

#include <cstdint>

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
// Fails on a blob that is not a well-formed TCP blob; `from` names its sender.
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

// Precedes every slot's payload on the stream.
struct FrameHeader {
  uint64_t bytes;  // payload size, <= slotBytes
  uint64_t seq;    // slot sequence number, checked to catch a desynchronised stream
};

}  // namespace tcp
}  // namespace braid
