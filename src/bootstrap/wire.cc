#include "bootstrap/wire.h"

#include <netinet/in.h>

#include <cstring>

namespace braid {

namespace {
constexpr char kSignature[8] = {'b', 'r', 'a', 'i', 'd', '-', 'i', 'd'};
}  // namespace

void packAddr(const sockaddr_storage& addr, WireAddr* out) {
  memset(out, 0, sizeof(*out));
  size_t len = addr.ss_family == AF_INET    ? sizeof(sockaddr_in)
               : addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6)
                                            : 0;
  static_assert(sizeof(WireAddr) >= sizeof(sockaddr_in6), "WireAddr too small");
  memcpy(out->bytes, &addr, len);
}

bool unpackAddr(const WireAddr& in, sockaddr_storage* out) {
  sockaddr_storage a{};
  memcpy(&a, in.bytes, sizeof(in.bytes));
  if (a.ss_family == AF_INET) {
    memset(reinterpret_cast<uint8_t*>(&a) + sizeof(sockaddr_in), 0,
           sizeof(a) - sizeof(sockaddr_in));
    if (reinterpret_cast<sockaddr_in&>(a).sin_port == 0) return false;
  } else if (a.ss_family == AF_INET6) {
    if (reinterpret_cast<sockaddr_in6&>(a).sin6_port == 0) return false;
  } else {
    return false;
  }
  *out = a;
  return true;
}

void encodeUniqueId(const UniqueIdContents& c, ncclUniqueId* id) {
  memset(id, 0, sizeof(*id));
  UniqueIdContents copy = c;
  memcpy(copy.signature, kSignature, sizeof(kSignature));
  memcpy(id->internal, &copy, sizeof(copy));
}

Result decodeUniqueId(const ncclUniqueId& id, UniqueIdContents* out) {
  UniqueIdContents c;
  memcpy(&c, id.internal, sizeof(c));
  if (memcmp(c.signature, kSignature, sizeof(kSignature)) != 0)
    return fail(ncclInvalidArgument,
                "the unique id was not made by braid's ncclGetUniqueId (or was corrupted in "
                "transit); pass every rank the same bytes that rank 0's ncclGetUniqueId returned");
  if (c.version != kUniqueIdVersion)
    return fail(ncclInvalidArgument,
                "the unique id has format version %u but this braid understands %u; run the same "
                "braid build on every rank",
                c.version, kUniqueIdVersion);
  sockaddr_storage root;
  if (!unpackAddr(c.root, &root))
    return fail(ncclInvalidArgument, "the unique id holds no valid root address (corrupted?)");
  *out = c;
  return Result::success();
}

uint64_t magicFromCommId(const std::string& commId, const std::string& jobId) {
  // FNV-1a over a domain-separated string: stable across processes and builds.
  std::string text = "braid-comm-id\n" + commId + "\n" + jobId;
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h ? h : 1;
}

}  // namespace braid
