// libFuzzer target: decodeUniqueIdBytes (the 128-byte ncclUniqueId every rank
// is handed by the user).
#include <cstring>

#include "bootstrap/wire.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  braid::bootstrap::UniqueIdContents c;
  braid::Result r = braid::bootstrap::decodeUniqueIdBytes(data, size, &c);
  if (!r.ok()) {
    fuzzCheckRefusal(r);
    return 0;
  }
  FUZZ_CHECK(size == sizeof(ncclUniqueId));
  FUZZ_CHECK(c.version == braid::bootstrap::kUniqueIdVersion);
  FUZZ_CHECK((c.flags & ~braid::bootstrap::kIdRootRunning) == 0);
  FUZZ_CHECK(c.magic != 0);
  sockaddr_storage root;
  FUZZ_CHECK(braid::bootstrap::unpackAddr(c.root, &root));
  FUZZ_CHECK(fuzzAddrValid(root));
  // Encoding what was decoded gives back the same decodable id.
  ncclUniqueId again;
  braid::bootstrap::encodeUniqueId(c, &again);
  braid::bootstrap::UniqueIdContents c2;
  FUZZ_CHECK(braid::bootstrap::decodeUniqueId(again, &c2).ok());
  FUZZ_CHECK(c2.magic == c.magic && c2.flags == c.flags &&
             memcmp(c2.root.bytes, c.root.bytes, sizeof(c.root.bytes)) == 0);
  return 0;
}
