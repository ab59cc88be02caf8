// libFuzzer target: tcp::decodeFrameHeader, the header before every slot on
// a TCP data connection.
#include <cstring>

#include "fuzz_check.h"
#include "transports/tcp/tcp_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  braid::tcp::FrameHeader f;
  braid::Result r = braid::tcp::decodeFrameHeader(data, size, fuzzcfg::kSlotBytes,
                                                  fuzzcfg::kExpectSeq, "fuzz", &f);
  if (!r.ok()) {
    fuzzCheckRefusal(r);
    return 0;
  }
  FUZZ_CHECK(size == sizeof(f));
  FUZZ_CHECK(f.bytes <= fuzzcfg::kSlotBytes);
  FUZZ_CHECK(f.seq == fuzzcfg::kExpectSeq);
  return 0;
}
