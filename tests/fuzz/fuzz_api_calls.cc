// libFuzzer target: the C API's arguments, in one process. Two ranks of one
// job (ncclCommInitAll) make the same call in one group, with fuzzed
// collective, count, datatype, op, root and buffers: NULL, in place
// (aliased), overlapping, or separate. The contract: never a crash, a bad
// argument is an error with a message, a valid call on real buffers
// succeeds, and a count whose buffers cannot exist is ncclInvalidArgument. Buffers are sized for
// the count (up to kMaxElems), so the engine never writes past them.
// Linked against libbraid.so; this file is built with ASan and UBSan.
#include <nccl.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "fuzz_check.h"

namespace {

constexpr int kRanks = 2;
constexpr size_t kMaxElems = 4096;

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <class T>
  T take() {
    T v{};
    const size_t n = size_ - pos_ < sizeof(T) ? size_ - pos_ : sizeof(T);
    std::memcpy(&v, data_ + pos_, n);
    pos_ += n;
    return v;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

enum class Call : uint8_t { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, Gather, Scatter,
                            SendRecv, kCount };
enum class Buffers : uint8_t { Separate, InPlace, Overlapping, NullSend, NullRecv, kCount };

struct Args {
  Call call;
  size_t count;
  int type;  // ints: out-of-range values are part of the input, and an enum
  int op;    // holding one is undefined behaviour in the harness itself
  int root;
  Buffers buffers;
};

Args decode(Input& in) {
  Args a;
  a.call = Call(in.take<uint8_t>() % uint8_t(Call::kCount));
  const uint8_t countKind = in.take<uint8_t>();
  const uint64_t raw = in.take<uint64_t>();
  // Mostly counts the buffers can hold; now and then one whose buffers could
  // not exist (2^48 elements and more), which must be refused: a count in
  // between would only make the engine write past the harness's buffers.
  a.count = countKind % 8 == 0 ? size_t(raw | (uint64_t(1) << 48)) : size_t(raw % (kMaxElems + 1));
  a.type = in.take<int8_t>() % 16;  // some out of range, some negative
  a.op = in.take<int8_t>() % 8;     // likewise
  a.root = in.take<int8_t>() % 4;                    // -3 .. 3 for 2 ranks
  a.buffers = Buffers(in.take<uint8_t>() % uint8_t(Buffers::kCount));
  return a;
}

size_t elemBytes(int t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

bool perRank(Call c) {
  return c == Call::AllGather || c == Call::ReduceScatter || c == Call::AllToAll || c == Call::Gather ||
         c == Call::Scatter;
}

// One rank's buffers: room for the call's largest side, plus slack so that
// an overlapping pair stays inside the allocation.
struct RankBuffers {
  std::vector<uint8_t> memory;
  void* send = nullptr;
  void* recv = nullptr;
};

RankBuffers buffersFor(const Args& a) {
  RankBuffers b;
  const size_t elem = elemBytes(a.type) ? elemBytes(a.type) : 8;
  const size_t count = a.count <= kMaxElems ? a.count : 1;
  const size_t bytes = count * elem * (perRank(a.call) ? kRanks : 1) + 64;
  b.memory.assign(2 * bytes, 0x3c);
  uint8_t* base = b.memory.data();
  switch (a.buffers) {
    case Buffers::Separate: b.send = base; b.recv = base + bytes; break;
    case Buffers::InPlace: b.send = b.recv = base; break;
    case Buffers::Overlapping: b.send = base; b.recv = base + elem; break;
    case Buffers::NullSend: b.send = nullptr; b.recv = base + bytes; break;
    case Buffers::NullRecv: b.send = base; b.recv = nullptr; break;
    default: break;
  }
  return b;
}

// Converted where passed: a local enum holding an out-of-range value would be
// loaded, which UBSan reports in the harness itself.
ncclDataType_t typeOf(const Args& a) { return static_cast<ncclDataType_t>(a.type); }
ncclRedOp_t opOf(const Args& a) { return static_cast<ncclRedOp_t>(a.op); }

ncclResult_t issue(const Args& a, const RankBuffers& b, int rank, ncclComm_t comm) {
  switch (a.call) {
    case Call::AllReduce: return ncclAllReduce(b.send, b.recv, a.count, typeOf(a), opOf(a), comm, nullptr);
    case Call::Broadcast: return ncclBroadcast(b.send, b.recv, a.count, typeOf(a), a.root, comm, nullptr);
    case Call::Reduce: return ncclReduce(b.send, b.recv, a.count, typeOf(a), opOf(a), a.root, comm, nullptr);
    case Call::AllGather: return ncclAllGather(b.send, b.recv, a.count, typeOf(a), comm, nullptr);
    case Call::ReduceScatter: return ncclReduceScatter(b.send, b.recv, a.count, typeOf(a), opOf(a), comm, nullptr);
    case Call::AllToAll: return ncclAlltoAll(b.send, b.recv, a.count, typeOf(a), comm, nullptr);
    case Call::Gather: return ncclGather(b.send, b.recv, a.count, typeOf(a), a.root, comm, nullptr);
    case Call::Scatter: return ncclScatter(b.send, b.recv, a.count, typeOf(a), a.root, comm, nullptr);
    case Call::SendRecv: {
      const int peer = 1 - rank;
      const ncclResult_t s = ncclSend(b.send, a.count, typeOf(a), peer, comm, nullptr);
      const ncclResult_t r = ncclRecv(b.recv, a.count, typeOf(a), peer, comm, nullptr);
      return s != ncclSuccess ? s : r;
    }
    default: return ncclInternalError;
  }
}

bool isResult(ncclResult_t r) { return r >= ncclSuccess && r < ncclNumResults; }

// Whether the arguments alone are wrong, so that braid must refuse them.
bool argumentsInvalid(const Args& a) {
  if (elemBytes(a.type) == 0) return true;
  const bool reduces = a.call == Call::AllReduce || a.call == Call::Reduce || a.call == Call::ReduceScatter;
  if (reduces && (a.op < 0 || a.op >= int(ncclNumOps))) return true;
  const bool rooted = a.call == Call::Broadcast || a.call == Call::Reduce || a.call == Call::Gather ||
                      a.call == Call::Scatter;
  if (rooted && (a.root < 0 || a.root >= kRanks)) return true;
  return a.count > kMaxElems;  // only absurd counts are that large (see decode)
}

ncclComm_t gComms[kRanks];

void makeComms() {
  const ncclResult_t r = ncclCommInitAll(gComms, kRanks, nullptr);
  if (r != ncclSuccess) std::fprintf(stderr, "ncclCommInitAll: %s\n", ncclGetLastError(nullptr));
  FUZZ_CHECK(r == ncclSuccess);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("BRAID_TIMEOUT", "20", 0);  // a broken contract must not hang the fuzzer forever
  makeComms();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  const Args a = decode(in);
  RankBuffers b[kRanks] = {buffersFor(a), buffersFor(a)};
  ncclResult_t calls[kRanks];
  FUZZ_CHECK(ncclGroupStart() == ncclSuccess);
  for (int r = 0; r < kRanks; ++r) calls[r] = issue(a, b[r], r, gComms[r]);
  const ncclResult_t end = ncclGroupEnd();
  bool failed = end != ncclSuccess;
  for (ncclResult_t r : calls) {
    FUZZ_CHECK(isResult(r));
    failed = failed || r != ncclSuccess;
  }
  FUZZ_CHECK(isResult(end));
  if (failed) FUZZ_CHECK(std::strlen(ncclGetLastError(nullptr)) > 0);
  if (argumentsInvalid(a)) FUZZ_CHECK(failed);
  // Valid arguments on real buffers (separate, or one buffer in place) run.
  if (!argumentsInvalid(a) && (a.buffers == Buffers::Separate || a.buffers == Buffers::InPlace)) {
    if (failed) std::fprintf(stderr, "valid call failed: %s\n", ncclGetLastError(nullptr));
    FUZZ_CHECK(!failed);
  }
  if (a.count > kMaxElems) {
    // Absurd counts: refused as arguments, before anything is planned.
    FUZZ_CHECK(calls[0] == ncclInvalidArgument || end == ncclInvalidArgument);
  }
  // A refused argument leaves the communicators usable; a failed run leaves
  // them in error: only then start again (each creation costs sockets).
  bool inError = false;
  for (ncclComm_t c : gComms) {
    ncclResult_t async = ncclSuccess;
    FUZZ_CHECK(ncclCommGetAsyncError(c, &async) == ncclSuccess);
    inError = inError || async != ncclSuccess;
  }
  if (inError) {
    for (ncclComm_t c : gComms) ncclCommDestroy(c);
    makeComms();
  }
  return 0;
}
