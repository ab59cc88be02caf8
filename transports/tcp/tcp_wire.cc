#include "transports/tcp/tcp_wire.h"

#include <nccl.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include "base/blob.h"

namespace braid::tcp {

namespace {

// An IPv4/IPv6 address with a port; the bytes past the family's sockaddr are
// cleared so that nothing unchecked travels on.
bool normalizeAddr(sockaddr_storage* a) {
  if (a->ss_family == AF_INET) {
    sockaddr_in in;
    memcpy(&in, a, sizeof(in));
    if (in.sin_port == 0) return false;
    *a = sockaddr_storage{};
    memcpy(a, &in, sizeof(in));
    return true;
  }
  if (a->ss_family == AF_INET6) {
    sockaddr_in6 in6;
    memcpy(&in6, a, sizeof(in6));
    if (in6.sin6_port == 0) return false;
    *a = sockaddr_storage{};
    memcpy(a, &in6, sizeof(in6));
    return true;
  }
  return false;
}

}  // namespace

Blob encodeBlob(const BlobContents& c) {
  Blob b;
  BlobWriter(&b).put(kBlobMagic).put(c.nonce).put(c.slotBytes).put(c.nslots).put(c.nsockets).put(c.addr);
  return b;
}

Result decodeBlob(const void* data, size_t len, const std::string& from, BlobContents* out) {
  BlobReader r(data, len);
  uint64_t magic = 0;
  BlobContents c;
  if (!r.get(&magic) || !r.get(&c.nonce) || !r.get(&c.slotBytes) || !r.get(&c.nslots) ||
      !r.get(&c.nsockets) || !r.get(&c.addr) || !r.atEnd())
    return fail(ncclInternalError, "malformed TCP connect blob from %s: %zu bytes, expected %zu",
                from.c_str(), len,
                sizeof(magic) + sizeof(c.nonce) + sizeof(c.slotBytes) + sizeof(c.nslots) +
                    sizeof(c.nsockets) + sizeof(c.addr));
  if (magic != kBlobMagic)
    return fail(ncclInternalError, "malformed TCP connect blob from %s: wrong magic %#llx "
                "(not a TCP blob: do the ranks agree on the transport?)",
                from.c_str(), static_cast<unsigned long long>(magic));
  if (c.slotBytes == 0 || c.nslots <= 0)
    return fail(ncclInternalError, "malformed TCP connect blob from %s: %d slots of %llu bytes",
                from.c_str(), c.nslots, static_cast<unsigned long long>(c.slotBytes));
  if (c.nsockets < 1 || c.nsockets > kMaxSockets)
    return fail(ncclInternalError, "malformed TCP connect blob from %s: %d sockets per "
                "connection, expected 1..%d", from.c_str(), c.nsockets, kMaxSockets);
  if (!normalizeAddr(&c.addr))
    return fail(ncclInternalError, "malformed TCP connect blob from %s: no IPv4/IPv6 address "
                "with a port (family %u)", from.c_str(), c.addr.ss_family);
  *out = c;
  return Result::success();
}

Result decodeBlob(const Blob& blob, const std::string& from, BlobContents* out) {
  return decodeBlob(blob.data(), blob.size(), from, out);
}

Result decodeHello(const void* data, size_t len, uint64_t nonce, Hello* out) {
  if (data == nullptr || len != sizeof(Hello))
    return fail(ncclRemoteError, "a hello of %zu bytes, not %zu", len, sizeof(Hello));
  Hello h;
  memcpy(&h, data, sizeof(h));
  if (h.magic != kHelloMagic) return fail(ncclRemoteError, "not a braid hello");
  if (h.nonce != nonce) return fail(ncclRemoteError, "a hello for another connection (wrong nonce)");
  if (h.slotBytes == 0 || h.nslots <= 0 || h.rank < 0 || h.channel < 0)
    return fail(ncclRemoteError, "a hello with impossible fields (rank %d, channel %d, %d slots "
                "of %llu bytes)", h.rank, h.channel, h.nslots,
                static_cast<unsigned long long>(h.slotBytes));
  if (h.nsockets < 1 || h.nsockets > kMaxSockets || h.socketIndex < 0 ||
      h.socketIndex >= h.nsockets)
    return fail(ncclRemoteError, "a hello for socket %d of %d (at most %d sockets)",
                h.socketIndex, h.nsockets, kMaxSockets);
  *out = h;
  return Result::success();
}

Result decodeFrameHeader(const void* data, size_t len, uint64_t slotBytes, uint64_t expectSeq,
                         const std::string& peer, FrameHeader* out) {
  if (data == nullptr || len != sizeof(FrameHeader))
    return fail(ncclRemoteError, "%s: a TCP frame header of %zu bytes, not %zu", peer.c_str(), len,
                sizeof(FrameHeader));
  FrameHeader h;
  memcpy(&h, data, sizeof(h));
  // Sizes come off the wire: check them before they bound any write.
  if (h.bytes > slotBytes)
    return fail(ncclRemoteError, "%s sent a TCP frame of %llu bytes, larger than the slot size "
                "%llu: the ranks disagree on the buffer size or the stream is corrupt",
                peer.c_str(), static_cast<unsigned long long>(h.bytes),
                static_cast<unsigned long long>(slotBytes));
  if (h.seq != expectSeq)
    return fail(ncclRemoteError, "%s sent TCP frame %llu where frame %llu was expected: the "
                "stream is corrupt", peer.c_str(), static_cast<unsigned long long>(h.seq),
                static_cast<unsigned long long>(expectSeq));
  *out = h;
  return Result::success();
}

Result decodeStripeHeader(const void* data, size_t len, uint64_t slotBytes, uint64_t expectSeq,
                          uint64_t expectBytes, const std::string& peer, FrameHeader* out) {
  FrameHeader h;
  BRAID_TRY(decodeFrameHeader(data, len, slotBytes, expectSeq, peer, &h));
  if (h.bytes != expectBytes)
    return fail(ncclRemoteError, "%s announced TCP frame %llu as %llu bytes on one socket and "
                "%llu on another: the stream is corrupt", peer.c_str(),
                static_cast<unsigned long long>(h.seq), static_cast<unsigned long long>(expectBytes),
                static_cast<unsigned long long>(h.bytes));
  *out = h;
  return Result::success();
}

int stripeCount(uint64_t bytes, int nsockets) {
  uint64_t fit = bytes / kMinStripeBytes;
  if (fit < 1 || nsockets <= 1) return 1;
  return static_cast<int>(std::min<uint64_t>(fit, static_cast<uint64_t>(nsockets)));
}

Stripe stripeOf(uint64_t bytes, int nsockets, int index) {
  const uint64_t n = static_cast<uint64_t>(stripeCount(bytes, nsockets));
  // Even shares rounded down to 64 bytes; the last stripe takes the rest, so
  // no stripe is more than 63 bytes under bytes / n.
  const uint64_t per = bytes / n / 64 * 64;
  const uint64_t i = std::min(static_cast<uint64_t>(index), n);
  const uint64_t begin = i * per;
  const uint64_t end = i + 1 >= n ? bytes : begin + per;
  return Stripe{std::min(begin, bytes), std::min(end, bytes) - std::min(begin, bytes)};
}

}  // namespace braid::tcp
