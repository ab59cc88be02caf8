#include "transports/ib/ib_blob.h"

#include <limits>

#include "base/blob.h"

namespace braid::ib {

namespace {

// The QP address, which the blob and the hello both carry (as fields of the
// same names, in the same order).
template <class T>
void putQpAddress(BlobWriter& w, const T& a) {
  w.put(a.qpn).put(a.psn).put(a.lid).put(a.port).put(a.mtu).put(a.linkLayer).put(a.gid);
}

template <class T>
bool getQpAddress(BlobReader& r, T* a) {
  return r.get(&a->qpn) && r.get(&a->psn) && r.get(&a->lid) && r.get(&a->port) && r.get(&a->mtu) &&
         r.get(&a->linkLayer) && r.get(&a->gid);
}

template <class T>
const char* invalidQpAddress(const T& a) {
  if (a.qpn >= (1u << 24)) return "QP number";
  if (a.psn >= (1u << 24)) return "PSN";
  if (a.mtu < 1 || a.mtu > 5) return "MTU";
  if (a.linkLayer < 1 || a.linkLayer > 2) return "link layer";
  if (a.port == 0) return "port";
  return nullptr;
}

}  // namespace

Blob encodeIbBlob(const IbConnInfo& i) {
  Blob b;
  BlobWriter w(&b);
  w.put(kIbBlobMagic).put(kIbBlobVersion);
  putQpAddress(w, i);
  w.put(i.ringAddr).put(i.rkey).put(i.slotBytes).put(i.nslots);
  w.put(i.handshakeAddr).put(i.nonce);
  return b;
}

namespace {

bool readAll(BlobReader& r, IbConnInfo* i) {
  return getQpAddress(r, i) && r.get(&i->ringAddr) &&
         r.get(&i->rkey) && r.get(&i->slotBytes) && r.get(&i->nslots) &&
         r.get(&i->handshakeAddr) && r.get(&i->nonce);
}

const char* invalidField(const IbConnInfo& i) {
  if (const char* bad = invalidQpAddress(i)) return bad;
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
  putQpAddress(w, h);
  w.put(h.creditAddr).put(h.creditRkey).put(h.slotBytes).put(h.nslots).put(h.rank).put(h.channel);
  return b;
}

Result decodeIbHello(const uint8_t* bytes, size_t size, const char* peer, IbHello* out) {
  BlobReader r(bytes, size);
  uint32_t magic = 0;
  uint16_t version = 0;
  IbHello h;
  const bool read = r.get(&magic) && r.get(&version) && r.get(&h.nonce) && getQpAddress(r, &h) &&
                    r.get(&h.creditAddr) &&
                    r.get(&h.creditRkey) && r.get(&h.slotBytes) && r.get(&h.nslots) &&
                    r.get(&h.rank) && r.get(&h.channel);
  if (!read || !r.atEnd() || magic != kIbHelloMagic || version != kIbBlobVersion)
    return fail(ncclInternalError, "malformed ib handshake from %s (%zu bytes)", peer, size);
  const char* bad = invalidQpAddress(h);
  if (!bad && (h.creditAddr == 0 || h.creditAddr % 8)) bad = "credit address";
  if (bad) return fail(ncclInternalError, "ib handshake from %s has an invalid %s", peer, bad);
  *out = h;
  return Result::success();
}

}  // namespace braid::ib
