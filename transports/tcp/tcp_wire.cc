#include "transports/tcp/tcp_wire.h"

#include <nccl.h>

#include "transports/common/blob_io.h"

namespace braid {
namespace tcp {

Blob encodeBlob(const BlobContents& c) {
  Blob b;
  BlobWriter(&b).put(kBlobMagic).put(c.nonce).put(c.slotBytes).put(c.nslots).put(c.addr);
  return b;
}

Result decodeBlob(const Blob& blob, const std::string& from, BlobContents* out) {
  BlobReader r(blob);
  uint64_t magic = 0;
  BlobContents c;
  if (!r.get(&magic) || !r.get(&c.nonce) || !r.get(&c.slotBytes) || !r.get(&c.nslots) ||
      !r.get(&c.addr) || !r.atEnd() || magic != kBlobMagic ||
      (c.addr.ss_family != AF_INET && c.addr.ss_family != AF_INET6))
    return fail(ncclInternalError, "malformed TCP connect blob from %s (%zu bytes)", from.c_str(),
                blob.size());
  *out = c;
  return Result::success();
}

}  // namespace tcp
}  // namespace braid
