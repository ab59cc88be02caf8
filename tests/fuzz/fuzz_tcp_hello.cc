// libFuzzer target: tcp::decodeHello, the first bytes a TCP transport
// listener reads from every connection it accepts.
#include <cstring>

#include "fuzz_check.h"
#include "transports/tcp/tcp_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  braid::tcp::Hello h;
  braid::Result r = braid::tcp::decodeHello(data, size, fuzzcfg::kNonce, &h);
  if (!r.ok()) {
    fuzzCheckRefusal(r);
    return 0;
  }
  FUZZ_CHECK(size == sizeof(h));
  FUZZ_CHECK(memcmp(&h, data, sizeof(h)) == 0);
  FUZZ_CHECK(h.magic == braid::tcp::kHelloMagic && h.nonce == fuzzcfg::kNonce);
  FUZZ_CHECK(h.slotBytes > 0 && h.nslots > 0 && h.rank >= 0 && h.channel >= 0);
  // The receiver indexes its socket table with socketIndex.
  FUZZ_CHECK(h.nsockets >= 1 && h.nsockets <= braid::tcp::kMaxSockets);
  FUZZ_CHECK(h.socketIndex >= 0 && h.socketIndex < h.nsockets);
  return 0;
}
