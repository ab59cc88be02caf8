#include "bootstrap/wire.h"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>

namespace braid::bootstrap {

namespace {

constexpr char kSignature[8] = {'b', 'r', 'a', 'i', 'd', '-', 'i', 'd'};

// Copies a fixed-size message out of `data`, or fails naming what it is.
template <class T>
Result readExact(const void* data, size_t len, const char* what, T* out) {
  if (data == nullptr && len != 0)
    return fail(ncclInternalError, "%s: no buffer for %zu bytes", what, len);
  if (len != sizeof(T))
    return fail(ncclRemoteError, "%s of %zu bytes is %s: it must be %zu bytes", what, len,
                len < sizeof(T) ? "truncated" : "too long", sizeof(T));
  memcpy(out, data, sizeof(T));
  return Result::success();
}

}  // namespace

void packAddr(const sockaddr_storage& addr, WireAddr* out) {
  memset(out, 0, sizeof(*out));
  size_t len = addr.ss_family == AF_INET    ? sizeof(sockaddr_in)
               : addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6)
                                            : 0;
  static_assert(sizeof(WireAddr) >= sizeof(sockaddr_in6), "WireAddr too small");
  memcpy(out->bytes, &addr, len);
}

Result decodeAddr(const void* data, size_t len, sockaddr_storage* out) {
  sa_family_t family = 0;
  if (data == nullptr || len < sizeof(family))
    return fail(ncclRemoteError, "socket address of %zu bytes is too short to name a family", len);
  memcpy(&family, data, sizeof(family));
  size_t need = family == AF_INET ? sizeof(sockaddr_in) : family == AF_INET6 ? sizeof(sockaddr_in6) : 0;
  if (need == 0)
    return fail(ncclRemoteError, "socket address has family %u, neither IPv4 (%d) nor IPv6 (%d)",
                family, AF_INET, AF_INET6);
  if (len < need)
    return fail(ncclRemoteError, "%s socket address truncated to %zu of %zu bytes",
                family == AF_INET ? "IPv4" : "IPv6", len, need);
  sockaddr_storage a{};
  memcpy(&a, data, need);  // the rest of `a` stays zero
  uint16_t port = family == AF_INET ? reinterpret_cast<const sockaddr_in&>(a).sin_port
                                    : reinterpret_cast<const sockaddr_in6&>(a).sin6_port;
  if (port == 0) return fail(ncclRemoteError, "socket address has no port");
  *out = a;
  return Result::success();
}

bool unpackAddr(const WireAddr& in, sockaddr_storage* out) {
  return decodeAddr(in.bytes, sizeof(in.bytes), out).ok();
}

void encodeUniqueId(const UniqueIdContents& c, ncclUniqueId* id) {
  memset(id, 0, sizeof(*id));
  UniqueIdContents copy = c;
  memcpy(copy.signature, kSignature, sizeof(kSignature));
  memcpy(id->internal, &copy, sizeof(copy));
}

Result decodeUniqueIdBytes(const void* data, size_t len, UniqueIdContents* out) {
  if (data == nullptr || len != sizeof(ncclUniqueId))
    return fail(ncclInvalidArgument, "a unique id has %zu bytes, not %zu: pass the whole "
                "ncclUniqueId that rank 0's ncclGetUniqueId returned",
                len, sizeof(ncclUniqueId));
  UniqueIdContents c;
  memcpy(&c, data, sizeof(c));
  if (memcmp(c.signature, kSignature, sizeof(kSignature)) != 0)
    return fail(ncclInvalidArgument,
                "the unique id was not made by braid's ncclGetUniqueId (or was corrupted in "
                "transit); pass every rank the same bytes that rank 0's ncclGetUniqueId returned");
  if (c.version != kUniqueIdVersion)
    return fail(ncclInvalidArgument,
                "the unique id has format version %u but this braid understands %u; run the same "
                "braid build on every rank",
                c.version, kUniqueIdVersion);
  if ((c.flags & ~kIdRootRunning) != 0)
    return fail(ncclInvalidArgument, "the unique id has unknown flags %#x (corrupted?)", c.flags);
  if (c.magic == 0)
    return fail(ncclInvalidArgument, "the unique id has no magic (corrupted?)");
  sockaddr_storage root;
  Result addr = decodeAddr(c.root.bytes, sizeof(c.root.bytes), &root);
  if (!addr.ok())
    return fail(ncclInvalidArgument, "the unique id holds no valid root address (corrupted?): %s",
                addr.message().c_str());
  *out = c;
  return Result::success();
}

Result decodeUniqueId(const ncclUniqueId& id, UniqueIdContents* out) {
  return decodeUniqueIdBytes(&id, sizeof(id), out);
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

Result decodeHello(const void* data, size_t len, uint64_t magic, int jobNranks,
                   HelloMessage* out) {
  Hello h;
  BRAID_TRY(readExact(data, len, "hello", &h));
  if (h.magic != magic)
    return fail(ncclRemoteError, h.kind == kHelloCheckIn
                                     ? "its magic differs (a rank started with another unique id?)"
                                     : "it sent bytes that are not a braid hello");
  if (h.kind != kHelloCheckIn && h.kind != kHelloQuery)
    return fail(ncclRemoteError, "it sent a message of unknown kind %#x", h.kind);
  if (h.nranks <= 0 || h.nranks > kMaxRanks)
    return fail(ncclRemoteError, "it claims nranks=%d, outside [1, %d]", h.nranks, kMaxRanks);
  if (jobNranks > 0 && h.nranks != jobNranks)
    return fail(ncclRemoteError, "it claims nranks=%d but the job has %d ranks", h.nranks,
                jobNranks);
  if (h.rank < 0 || h.rank >= h.nranks)
    return fail(ncclRemoteError, "its rank %d is outside [0, %d)", h.rank, h.nranks);
  HelloMessage m;
  Result addr = decodeAddr(h.addr.bytes, sizeof(h.addr.bytes), &m.addr);
  if (!addr.ok())
    return fail(ncclRemoteError, "rank %d sent no valid listening address: %s", h.rank,
                addr.message().c_str());
  m.kind = h.kind;
  m.rank = h.rank;
  m.nranks = h.nranks;
  *out = m;
  return Result::success();
}

Result decodeRootReply(const void* data, size_t len, uint64_t magic, int nranks, RootReply* out) {
  RootReply r;
  BRAID_TRY(readExact(data, len, "bootstrap root reply", &r));
  if (r.magic != magic)
    return fail(ncclRemoteError, "the reply has a wrong magic: it does not come from this job's "
                "bootstrap root (stale NCCL_COMM_ID port reused by another job?)");
  if (nranks <= 0 || nranks > kMaxRanks)
    return fail(ncclInternalError, "decoding a root reply for nranks=%d", nranks);
  if (r.kind == kReplyTable) {
    if (r.count != static_cast<uint32_t>(nranks))
      return fail(ncclRemoteError, "the root sent a table of %u ranks for a %d-rank job", r.count,
                  nranks);
  } else if (r.kind == kReplyMissing) {
    if (r.count > static_cast<uint32_t>(nranks))
      return fail(ncclRemoteError, "the root sent a corrupt status (%u missing of %d)", r.count,
                  nranks);
  } else {
    return fail(ncclRemoteError, "the root sent an unknown reply %#x", r.kind);
  }
  *out = r;
  return Result::success();
}

size_t rootReplyPayloadBytes(const RootReply& reply) {
  size_t each = reply.kind == kReplyTable ? sizeof(WireAddr) : sizeof(int32_t);
  return static_cast<size_t>(reply.count) * each;
}

Result decodeAddressTable(const void* data, size_t len, int nranks,
                          std::vector<sockaddr_storage>* out) {
  if (nranks <= 0 || nranks > kMaxRanks)
    return fail(ncclInternalError, "decoding an address table for nranks=%d", nranks);
  const size_t want = static_cast<size_t>(nranks) * sizeof(WireAddr);
  if (data == nullptr || len != want)
    return fail(ncclRemoteError, "address table of %zu bytes for %d ranks: it must be %zu bytes",
                len, nranks, want);
  std::vector<sockaddr_storage> table(nranks);
  const uint8_t* p = static_cast<const uint8_t*>(data);
  for (int r = 0; r < nranks; ++r) {
    Result a = decodeAddr(p + static_cast<size_t>(r) * sizeof(WireAddr), sizeof(WireAddr), &table[r]);
    if (!a.ok())
      return fail(ncclRemoteError, "no valid address for rank %d: %s", r, a.message().c_str());
  }
  *out = std::move(table);
  return Result::success();
}

Result decodeMissingRanks(const void* data, size_t len, int nranks, MissingRanks* out) {
  if (nranks <= 0 || nranks > kMaxRanks)
    return fail(ncclInternalError, "decoding a missing-rank list for nranks=%d", nranks);
  if ((data == nullptr && len != 0) || len % sizeof(int32_t) != 0 ||
      len / sizeof(int32_t) > static_cast<size_t>(nranks))
    return fail(ncclRemoteError, "missing-rank list of %zu bytes for %d ranks", len, nranks);
  MissingRanks m;
  std::vector<int> all;
  const uint8_t* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < len / sizeof(int32_t); ++i) {
    int32_t v;
    memcpy(&v, p + i * sizeof(v), sizeof(v));
    // 64-bit arithmetic: -(INT32_MIN) does not fit an int32.
    int64_t rank = v >= 0 ? v : -static_cast<int64_t>(v) - 1;
    if (rank >= nranks)
      return fail(ncclRemoteError, "missing-rank list names rank %lld of a %d-rank job",
                  static_cast<long long>(rank), nranks);
    (v >= 0 ? m.never : m.left).push_back(static_cast<int>(rank));
    all.push_back(static_cast<int>(rank));
  }
  std::sort(all.begin(), all.end());
  auto dup = std::adjacent_find(all.begin(), all.end());
  if (dup != all.end())
    return fail(ncclRemoteError, "missing-rank list names rank %d twice", *dup);
  *out = std::move(m);
  return Result::success();
}

Result decodeConnHeader(const void* data, size_t len, uint64_t magic, int selfRank, int nranks,
                        ConnHeader* out) {
  ConnHeader h;
  BRAID_TRY(readExact(data, len, "connection header", &h));
  if (h.magic != magic) return fail(ncclRemoteError, "wrong magic (not a rank of this job)");
  if (h.rank < 0 || h.rank >= nranks || h.rank == selfRank)
    return fail(ncclRemoteError, "it claims to be rank %d (this is rank %d of %d)", h.rank,
                selfRank, nranks);
  *out = h;
  return Result::success();
}

Result decodeFrameHeader(const void* data, size_t len, uint64_t magic, FrameHeader* out) {
  FrameHeader f;
  BRAID_TRY(readExact(data, len, "message header", &f));
  if (f.check != frameCheck(magic))
    return fail(ncclRemoteError, "bad frame check %#x (the stream lost its framing)", f.check);
  if (f.size > kMaxMessageBytes)
    return fail(ncclRemoteError, "message size %llu exceeds the %llu-byte limit",
                static_cast<unsigned long long>(f.size),
                static_cast<unsigned long long>(kMaxMessageBytes));
  *out = f;
  return Result::success();
}

}  // namespace braid::bootstrap
