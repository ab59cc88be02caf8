// Shared by the libFuzzer targets: a check that crashes the fuzzer (so the
// input is saved and the CTest run fails) when a decoder breaks its contract.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: decoder contract broken: %s\n", __FILE__, __LINE__, \
                   #cond);                                                            \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

// The magic, nonce and job shape the targets decode against; the seed corpora
// (make_corpus.py) are built with the same values.
namespace fuzzcfg {
constexpr unsigned long long kMagic = 0x0123456789abcdefull;
constexpr unsigned long long kNonce = 0xfedcba9876543210ull;
constexpr int kNranks = 4;
constexpr int kSelfRank = 1;
constexpr unsigned long long kSlotBytes = 4096;
constexpr unsigned long long kExpectSeq = 7;
constexpr unsigned long long kStripeBytes = 100;  // size socket 0 announced (tcp stripes)
}  // namespace fuzzcfg

// What every decoder promises about an address it accepted.
inline bool fuzzAddrValid(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return reinterpret_cast<const sockaddr_in&>(a).sin_port != 0;
  if (a.ss_family == AF_INET6) return reinterpret_cast<const sockaddr_in6&>(a).sin6_port != 0;
  return false;
}

// A refusal must say why.
template <class R>
inline void fuzzCheckRefusal(const R& r) {
  FUZZ_CHECK(r.code() != 0);
  FUZZ_CHECK(!r.message().empty());
}
