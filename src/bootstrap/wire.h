// Byte layouts of the bootstrap: the unique id, the rank <-> root check-in, and
// the framing of point-to-point messages, and the decoders that turn bytes from
// the network back into them. Integers travel in host byte order: every rank of
// a job runs the same braid build on the same architecture, and the magic check
// rejects anything else.
//
// Every decoder is a pure function over (bytes, length): it checks the length
// and every field before anything is trusted and says in its Result what is
// wrong. The callers add who sent the bytes. tests/fuzz/ runs each under
// libFuzzer, so keep them free of I/O, logging and global state.
#pragma once

#include <nccl.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace braid::bootstrap {

// An IPv4 or IPv6 socket address (sockaddr_in / sockaddr_in6 bytes).
struct WireAddr {
  uint8_t bytes[28];
};
void packAddr(const sockaddr_storage& addr, WireAddr* out);
// An IPv4 or IPv6 address with a non-zero port in the first `len` bytes of a
// sockaddr; bytes past the family's sockaddr are ignored.
Result decodeAddr(const void* data, size_t len, sockaddr_storage* out);
// False when the bytes hold no IPv4/IPv6 address with a port.
bool unpackAddr(const WireAddr& in, sockaddr_storage* out);

// ---- unique id (ncclUniqueId, 128 bytes) ----
constexpr uint32_t kUniqueIdVersion = 1;
constexpr uint32_t kIdRootRunning = 1u << 0;  // createUniqueId started the root

struct UniqueIdContents {
  char signature[8];  // "braid-id"
  uint32_t version;
  uint32_t flags;
  uint64_t magic;  // random per id; every connection of the job proves it knows it
  WireAddr root;
};
static_assert(sizeof(UniqueIdContents) <= sizeof(ncclUniqueId), "unique id does not fit");

void encodeUniqueId(const UniqueIdContents& c, ncclUniqueId* id);
// `len` must be sizeof(ncclUniqueId): ids are passed around whole.
Result decodeUniqueIdBytes(const void* data, size_t len, UniqueIdContents* out);
Result decodeUniqueId(const ncclUniqueId& id, UniqueIdContents* out);
// The magic every process derives from NCCL_COMM_ID (and BRAID_JOB_ID if set).
uint64_t magicFromCommId(const std::string& commId, const std::string& jobId);

// ---- rank <-> root ----
constexpr uint32_t kHelloCheckIn = 0x48454c4f;  // rank announces itself
constexpr uint32_t kHelloQuery = 0x51525920;    // rank at its deadline asks who is missing
constexpr int32_t kMaxRanks = 1 << 22;

struct Hello {
  uint64_t magic;
  uint32_t kind;
  int32_t rank;
  int32_t nranks;
  uint32_t reserved;
  WireAddr addr;  // where this rank listens for its peers
  uint32_t pad;
};
static_assert(sizeof(Hello) == 56, "Hello layout");

// A hello or query as the root accepts it.
struct HelloMessage {
  uint32_t kind = 0;  // kHelloCheckIn or kHelloQuery
  int rank = -1;
  int nranks = 0;
  sockaddr_storage addr{};  // where the rank listens
};
// Decodes a rank's message to the root of the job with `magic`. `jobNranks` is
// the job's size, or 0 while the root does not know it yet.
Result decodeHello(const void* data, size_t len, uint64_t magic, int jobNranks,
                   HelloMessage* out);

constexpr uint32_t kReplyTable = 0x5441424c;    // followed by `count` WireAddr, one per rank
constexpr uint32_t kReplyMissing = 0x4d495353;  // followed by `count` int32 missing ranks

struct RootReply {
  uint64_t magic;
  uint32_t kind;
  uint32_t count;
};
static_assert(sizeof(RootReply) == 16, "RootReply layout");

// Decodes the root's reply header to a rank of an `nranks`-rank job: a table of
// exactly nranks addresses or a list of at most nranks missing ranks.
Result decodeRootReply(const void* data, size_t len, uint64_t magic, int nranks, RootReply* out);
// Bytes that follow a reply that decodeRootReply accepted.
size_t rootReplyPayloadBytes(const RootReply& reply);
// The table that follows kReplyTable: one valid address per rank.
Result decodeAddressTable(const void* data, size_t len, int nranks,
                          std::vector<sockaddr_storage>* out);
// The list that follows kReplyMissing: rank r that never checked in travels as
// r, one that checked in and left since as -(r+1). No rank appears twice.
struct MissingRanks {
  std::vector<int> never;
  std::vector<int> left;
};
Result decodeMissingRanks(const void* data, size_t len, int nranks, MissingRanks* out);

// ---- rank <-> rank ----
struct ConnHeader {  // first bytes on every rank-to-rank connection
  uint64_t magic;
  int32_t rank;  // the sender
  uint32_t reserved;
};
static_assert(sizeof(ConnHeader) == 16, "ConnHeader layout");

// The header on a connection that rank `selfRank` of `nranks` accepted: right
// magic, and a sender that is another rank of the job.
Result decodeConnHeader(const void* data, size_t len, uint64_t magic, int selfRank, int nranks,
                        ConnHeader* out);

struct FrameHeader {  // before every message
  uint32_t check;     // frameCheck(magic): catches a stream that lost its framing
  uint32_t tag;
  uint64_t size;
};
static_assert(sizeof(FrameHeader) == 16, "FrameHeader layout");

inline uint32_t frameCheck(uint64_t magic) {
  return static_cast<uint32_t>(magic ^ (magic >> 32) ^ 0x9e3779b9u);
}

// Largest single message; bigger sizes are refused (and read as corruption).
constexpr uint64_t kMaxMessageBytes = 1ull << 30;

// A message header on a stream of the job with `magic`: the frame check holds
// and the size is within kMaxMessageBytes.
Result decodeFrameHeader(const void* data, size_t len, uint64_t magic, FrameHeader* out);

}  // namespace braid::bootstrap
