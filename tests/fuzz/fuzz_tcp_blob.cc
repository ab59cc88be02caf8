// libFuzzer target: tcp::decodeBlob, the TCP transport's connect blob that a
// sender receives over the bootstrap.
#include <cstring>

#include "fuzz_check.h"
#include "transports/tcp/tcp_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  braid::tcp::BlobContents c;
  braid::Result r = braid::tcp::decodeBlob(data, size, "fuzz", &c);
  if (!r.ok()) {
    fuzzCheckRefusal(r);
    return 0;
  }
  FUZZ_CHECK(c.slotBytes > 0 && c.nslots > 0);
  FUZZ_CHECK(c.nsockets >= 1 && c.nsockets <= braid::tcp::kMaxSockets);
  FUZZ_CHECK(fuzzAddrValid(c.addr));
  // What was accepted encodes back to a blob that decodes to the same values.
  braid::Blob again = braid::tcp::encodeBlob(c);
  FUZZ_CHECK(again.size() == size);
  braid::tcp::BlobContents c2;
  FUZZ_CHECK(braid::tcp::decodeBlob(again, "fuzz", &c2).ok());
  FUZZ_CHECK(c2.nonce == c.nonce && c2.slotBytes == c.slotBytes && c2.nslots == c.nslots &&
             c2.nsockets == c.nsockets &&
             memcmp(&c2.addr, &c.addr, sizeof(c.addr)) == 0);
  return 0;
}
