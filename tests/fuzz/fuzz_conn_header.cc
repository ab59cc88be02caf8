// libFuzzer target: decodeConnHeader, what a rank's bootstrap listener makes
// of the first 16 bytes of an incoming connection.
#include <cstring>

#include "bootstrap/wire.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  braid::bootstrap::ConnHeader h;
  braid::Result r = braid::bootstrap::decodeConnHeader(data, size, fuzzcfg::kMagic, fuzzcfg::kSelfRank,
                                            fuzzcfg::kNranks, &h);
  if (!r.ok()) {
    fuzzCheckRefusal(r);
    return 0;
  }
  FUZZ_CHECK(size == sizeof(h));
  FUZZ_CHECK(memcmp(&h, data, sizeof(h)) == 0);
  FUZZ_CHECK(h.magic == fuzzcfg::kMagic);
  FUZZ_CHECK(h.rank >= 0 && h.rank < fuzzcfg::kNranks && h.rank != fuzzcfg::kSelfRank);
  return 0;
}
