// libFuzzer target: decodeRootReply and the payload decoders behind it
// (decodeAddressTable, decodeMissingRanks): what a rank makes of the root's
// answer. The input is the reply header followed by its payload.
#include <cstring>

#include "bootstrap/wire.h"
#include "fuzz_check.h"

namespace {

void decodeFor(const uint8_t* data, size_t size, int nranks) {
  braid::bootstrap::RootReply reply;
  const size_t head = size < sizeof(reply) ? size : sizeof(reply);
  braid::Result r = braid::bootstrap::decodeRootReply(data, head, fuzzcfg::kMagic, nranks, &reply);
  if (!r.ok()) {
    fuzzCheckRefusal(r);
    return;
  }
  FUZZ_CHECK(reply.magic == fuzzcfg::kMagic);
  const uint8_t* payload = data + head;
  const size_t len = size - head;
  const size_t want = braid::bootstrap::rootReplyPayloadBytes(reply);
  if (reply.kind == braid::bootstrap::kReplyTable) {
    FUZZ_CHECK(reply.count == static_cast<uint32_t>(nranks));
    std::vector<sockaddr_storage> table;
    braid::Result t = braid::bootstrap::decodeAddressTable(payload, len, nranks, &table);
    if (!t.ok()) {
      fuzzCheckRefusal(t);
      return;
    }
    FUZZ_CHECK(len == want);
    FUZZ_CHECK(table.size() == static_cast<size_t>(nranks));
    for (const auto& a : table) FUZZ_CHECK(fuzzAddrValid(a));
  } else {
    FUZZ_CHECK(reply.kind == braid::bootstrap::kReplyMissing);
    FUZZ_CHECK(reply.count <= static_cast<uint32_t>(nranks));
    braid::bootstrap::MissingRanks miss;
    braid::Result m = braid::bootstrap::decodeMissingRanks(payload, len, nranks, &miss);
    if (!m.ok()) {
      fuzzCheckRefusal(m);
      return;
    }
    FUZZ_CHECK(len % sizeof(int32_t) == 0);
    FUZZ_CHECK(miss.never.size() + miss.left.size() == len / sizeof(int32_t));
    std::vector<bool> seen(nranks, false);
    for (const auto* list : {&miss.never, &miss.left}) {
      for (int rank : *list) {
        FUZZ_CHECK(rank >= 0 && rank < nranks);
        FUZZ_CHECK(!seen[rank]);
        seen[rank] = true;
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  decodeFor(data, size, fuzzcfg::kNranks);
  decodeFor(data, size, 1);
  return 0;
}
