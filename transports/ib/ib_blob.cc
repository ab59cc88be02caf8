#include "transports/ib/ib_blob.h"

#include <limits>

#include "transports/common/blob_io.h"

namespace braid {
namespace ib {

Blob encodeIbBlob(const IbConnInfo& i) {
  Blob b;
  BlobWriter w(&b);
  w.put(kIbBlobMagic).put(kIbBlobVersion);
  w.put(i.qpn).put(i.psn).put(i.lid).put(i.port).put(i.mtu).put(i.linkLayer).put(i.gid);
  w.put(i.ringAddr).put(i.rkey).put(i.slotBytes).put(i.nslots);
  w.put(i.handshakeAddr).put(i.nonce);
  return b;
}

namespace {

bool readAll(BlobReader& r, IbConnInfo* i) {
  return r.get(&i->qpn) && r.get(&i->psn) && r.get(&i->lid) && r.get(&i->port) &&
         r.get(&i->mtu) && r.get(&i->linkLayer) && r.get(&i->gid) && r.get(&i->ringAddr) &&
         r.get(&i->rkey) && r.get(&i->slotBytes) && r.get(&i->nslots) &&
         r.get(&i->handshakeAddr) && r.get(&i->nonce);
}

const char* invalidField(const IbConnInfo& i) {
  if (i.qpn >= (1u << 24)) return "QP number";
  if (i.psn >= (1u << 24)) return "PSN";
  if (i.mtu < 1 || i.mtu > 5) return "MTU";
  if (i.linkLayer < 1 || i.linkLayer > 2) return "link layer";
  if (i.port == 0) return "port";
  if (i.nslots == 0 || i.nslots > kMaxIbSlots) return "slot count";
  if (i.slotBytes == 0) return "slot size";
  const uint64_t ring = uint64_t{i.nslots} * i.slotBytes;  // < 2^48: cannot overflow
  if (i.ringAddr == 0 || i.ringAddr > std::numeric_limits<uint64_t>::max() - ring)
    return "ring address";
  return nullptr;
}

}  // namespace

Result decodeIbBlob(const Blob& blob, const char* peer, IbConnInfo* out) {
  BlobReader r(blob);
  uint32_t magic = 0;
  uint16_t version = 0;
  if (!r.get(&magic) || magic != kIbBlobMagic || !r.get(&version))
    return fail(ncclInternalError, "malformed ib connect blob from %s (%zu bytes, bad magic)",
                peer, blob.size());
  if (version != kIbBlobVersion)
    return fail(ncclInternalError,
                "ib connect blob from %s has version %u, this braid speaks %u: mixed builds?",
                peer, version, kIbBlobVersion);
  IbConnInfo info;
  if (!readAll(r, &info) || !r.atEnd())
    return fail(ncclInternalError, "malformed ib connect blob from %s (%zu bytes)", peer,
                blob.size());
  if (const char* bad = invalidField(info))
    return fail(ncclInternalError, "ib connect blob from %s has an invalid %s", peer, bad);
  *out = info;
  return Result::success();
}

Blob encodeIbHello(const IbHello& h) {
  Blob b;
  BlobWriter w(&b);
  w.put(kIbHelloMagic).put(kIbBlobVersion).put(h.nonce);
  w.put(h.qpn).put(h.psn).put(h.lid).put(h.port).put(h.mtu).put(h.linkLayer).put(h.gid);
  w.put(h.creditAddr).put(h.creditRkey).put(h.slotBytes).put(h.nslots).put(h.rank).put(h.channel);
  return b;
}

Result decodeIbHello(const uint8_t* bytes, size_t size, const char* peer, IbHello* out) {
  BlobReader r(bytes, size);
  uint32_t magic = 0;
  uint16_t version = 0;
  IbHello h;
  const bool read = r.get(&magic) && r.get(&version) && r.get(&h.nonce) && r.get(&h.qpn) &&
                    r.get(&h.psn) && r.get(&h.lid) && r.get(&h.port) && r.get(&h.mtu) &&
                    r.get(&h.linkLayer) && r.get(&h.gid) && r.get(&h.creditAddr) &&
                    r.get(&h.creditRkey) && r.get(&h.slotBytes) && r.get(&h.nslots) &&
                    r.get(&h.rank) && r.get(&h.channel);
  if (!read || !r.atEnd() || magic != kIbHelloMagic || version != kIbBlobVersion)
    return fail(ncclInternalError, "malformed ib handshake from %s (%zu bytes)", peer, size);
  const char* bad = h.qpn >= (1u << 24)                       ? "QP number"
                    : h.psn >= (1u << 24)                     ? "PSN"
                    : h.mtu < 1 || h.mtu > 5                  ? "MTU"
                    : h.linkLayer < 1 || h.linkLayer > 2      ? "link layer"
                    : h.port == 0                             ? "port"
                    : h.creditAddr == 0 || h.creditAddr % 8 ? "credit address"
                                                              : nullptr;
  if (bad) return fail(ncclInternalError, "ib handshake from %s has an invalid %s", peer, bad);
  *out = h;
  return Result::success();
}

}  // namespace ib
}  // namespace braid
