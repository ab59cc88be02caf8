// libFuzzer target: decodeFrameHeader, the header before every tagged
// point-to-point bootstrap message.
#include <cstring>

#include "bootstrap/wire.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  braid::bootstrap::FrameHeader f;
  braid::Result r = braid::bootstrap::decodeFrameHeader(data, size, fuzzcfg::kMagic, &f);
  if (!r.ok()) {
    fuzzCheckRefusal(r);
    return 0;
  }
  FUZZ_CHECK(size == sizeof(f));
  FUZZ_CHECK(memcmp(&f, data, sizeof(f)) == 0);
  FUZZ_CHECK(f.check == braid::bootstrap::frameCheck(fuzzcfg::kMagic));
  FUZZ_CHECK(f.size <= braid::bootstrap::kMaxMessageBytes);
  return 0;
}
