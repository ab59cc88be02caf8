// libFuzzer target: tcp::decodeFrameHeader and tcp::decodeStripeHeader, the
// headers before every slot (and every stripe of a slot) on a TCP data
// connection, and the stripe layout the receiver derives from the size.
#include <cstring>

#include "fuzz_check.h"
#include "transports/tcp/tcp_wire.h"

namespace {

// The receiver writes stripe i of a slot of `bytes` at [offset, offset+len):
// the stripes must tile [0, bytes) in order, for every socket count.
void checkStripes(uint64_t bytes, int nsockets) {
  const int count = braid::tcp::stripeCount(bytes, nsockets);
  FUZZ_CHECK(count >= 1 && count <= nsockets);
  uint64_t next = 0;
  for (int i = 0; i < count; ++i) {
    braid::tcp::Stripe s = braid::tcp::stripeOf(bytes, nsockets, i);
    FUZZ_CHECK(s.offset == next);
    FUZZ_CHECK(s.bytes <= bytes - s.offset);
    FUZZ_CHECK(count == 1 || s.bytes + 63 >= braid::tcp::kMinStripeBytes);
    next = s.offset + s.bytes;
  }
  FUZZ_CHECK(next == bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  braid::tcp::FrameHeader f;
  braid::Result r = braid::tcp::decodeFrameHeader(data, size, fuzzcfg::kSlotBytes,
                                                  fuzzcfg::kExpectSeq, "fuzz", &f);
  // A stripe header must also repeat the size socket 0 announced.
  braid::tcp::FrameHeader g;
  braid::Result rs = braid::tcp::decodeStripeHeader(data, size, fuzzcfg::kSlotBytes,
                                                    fuzzcfg::kExpectSeq, fuzzcfg::kStripeBytes,
                                                    "fuzz", &g);
  if (!rs.ok()) fuzzCheckRefusal(rs);
  else FUZZ_CHECK(r.ok() && g.bytes == fuzzcfg::kStripeBytes && g.seq == fuzzcfg::kExpectSeq);

  // Sizes and socket counts from the input, bounded as the decoders bound them.
  if (size >= 9) {
    uint64_t bytes;
    memcpy(&bytes, data, sizeof(bytes));
    int nsockets = 1 + data[8] % braid::tcp::kMaxSockets;
    checkStripes(bytes % (braid::tcp::kMinStripeBytes * 200), nsockets);
    checkStripes(bytes >> 16, nsockets);
  }

  if (!r.ok()) {
    fuzzCheckRefusal(r);
    return 0;
  }
  FUZZ_CHECK(size == sizeof(f));
  FUZZ_CHECK(f.bytes <= fuzzcfg::kSlotBytes);
  FUZZ_CHECK(f.seq == fuzzcfg::kExpectSeq);
  return 0;
}
