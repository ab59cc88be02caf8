// libFuzzer target: decodeHello, what the bootstrap root makes of the first
// 56 bytes of every connection (a rank's check-in, or its later query).
#include <cstring>

#include "bootstrap/wire.h"
#include "fuzz_check.h"

namespace {

void decodeAs(const uint8_t* data, size_t size, int jobNranks) {
  braid::bootstrap::HelloMessage m;
  braid::Result r = braid::bootstrap::decodeHello(data, size, fuzzcfg::kMagic, jobNranks, &m);
  if (!r.ok()) {
    fuzzCheckRefusal(r);
    return;
  }
  FUZZ_CHECK(size == sizeof(braid::bootstrap::Hello));
  braid::bootstrap::Hello h;
  memcpy(&h, data, sizeof(h));
  FUZZ_CHECK(h.magic == fuzzcfg::kMagic);
  FUZZ_CHECK(m.kind == braid::bootstrap::kHelloCheckIn || m.kind == braid::bootstrap::kHelloQuery);
  FUZZ_CHECK(m.nranks >= 1 && m.nranks <= braid::bootstrap::kMaxRanks);
  FUZZ_CHECK(jobNranks <= 0 || m.nranks == jobNranks);
  FUZZ_CHECK(m.rank >= 0 && m.rank < m.nranks);
  FUZZ_CHECK(fuzzAddrValid(m.addr));
  // The root re-packs the address into its table: it must round-trip.
  braid::bootstrap::WireAddr packed;
  braid::bootstrap::packAddr(m.addr, &packed);
  sockaddr_storage back;
  FUZZ_CHECK(braid::bootstrap::unpackAddr(packed, &back));
  FUZZ_CHECK(memcmp(&back, &m.addr, sizeof(back)) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  decodeAs(data, size, 0);  // the root of a private id: the first hello fixes nranks
  decodeAs(data, size, fuzzcfg::kNranks);
  return 0;
}
