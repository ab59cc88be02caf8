#include "plan_checker.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <array>
#include <cstdint>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <vector>

namespace braid {
namespace {

// ---- contribution sets ----------------------------------------------------------

// Sets of ranks as sorted, disjoint, non-touching intervals [lo, hi). A set of
// at most two intervals (nearly all of them: inputs, ring partial sums, which
// wrap around once, tree and recursive-doubling partial sums, the complete
// sum) is encoded in its 64-bit id, 15 bits per bound (bits 0..59); larger
// ones are interned, with the top bit set in their id. Equal sets have equal
// ids. Bits 60..62 stay zero: Value keeps its flags there.
using SetId = uint64_t;

class SetTable {
 public:
  static constexpr int kMaxRanks = (1 << 15) - 1;

  static SetId interval(int lo, int hi) {
    const int32_t f[2] = {lo, hi};
    return pack(f, 2);
  }

  // The union of two disjoint sets. False when they share a rank (a
  // contribution counted twice); *dup is then one such rank.
  bool unite(SetId a, SetId b, SetId* out, int* dup) {
    if (!((a | b) & kInterned)) {  // the common case: no table
      int32_t x[4], y[4], m[8];
      const int nx = unpack(a, x), ny = unpack(b, y);
      const int nm = merge(x, nx, y, ny, m, dup);
      if (*dup >= 0) return false;
      if (nm <= 4) {
        *out = pack(m, nm);
        return true;
      }
    }
    if (a > b) std::swap(a, b);
    auto it = unions_.find({a, b});
    if (it == unions_.end()) {
      const std::vector<int32_t> x = flat(a), y = flat(b);
      std::vector<int32_t> m(x.size() + y.size());
      int d = -1;
      m.resize(merge(x.data(), static_cast<int>(x.size()), y.data(), static_cast<int>(y.size()), m.data(), &d));
      it = unions_.emplace(std::make_pair(a, b), std::make_pair(d < 0 ? intern(m) : 0, d)).first;
    }
    *out = it->second.first;
    *dup = it->second.second;
    return *dup < 0;
  }

  std::string describe(SetId id) const {
    std::ostringstream os;
    const auto s = flat(id);
    os << "{";
    for (size_t i = 0; i < s.size(); i += 2) {
      if (i) os << ",";
      if (s[i + 1] == s[i] + 1)
        os << s[i];
      else
        os << s[i] << ".." << s[i + 1] - 1;
    }
    return os.str() + "}";
  }

 private:
  static constexpr SetId kInterned = SetId(1) << 63;
  static constexpr SetId kMask = (1u << 15) - 1;

  // [lo0, hi0, lo1, hi1]; a second interval always has lo1 > hi0 >= 1, so 0 means none.
  static SetId pack(const int32_t* f, int n) {
    SetId id = 0;
    for (int i = 0; i < n; ++i) id |= static_cast<SetId>(f[i]) << (15 * (3 - i));
    return id;
  }
  static int unpack(SetId id, int32_t* f) {
    for (int i = 0; i < 4; ++i) f[i] = static_cast<int32_t>((id >> (15 * (3 - i))) & kMask);
    return f[2] == 0 ? 2 : 4;
  }

  std::vector<int32_t> flat(SetId id) const {
    if (id & kInterned) return sets_[id & ~kInterned];
    int32_t f[4];
    return std::vector<int32_t>(f, f + unpack(id, f));
  }

  SetId intern(const std::vector<int32_t>& flat) {
    if (flat.size() <= 4) return pack(flat.data(), static_cast<int>(flat.size()));
    auto it = ids_.find(flat);
    if (it != ids_.end()) return it->second;
    const SetId id = kInterned | sets_.size();
    sets_.push_back(flat);
    ids_.emplace(flat, id);
    return id;
  }

  // Merges two interval lists into `out`; returns its length. *dup is a rank
  // in both, or -1.
  static int merge(const int32_t* x, int nx, const int32_t* y, int ny, int32_t* out, int* dup) {
    int i = 0, j = 0, n = 0;
    *dup = -1;
    while (i < nx || j < ny) {
      const bool takeX = j >= ny || (i < nx && x[i] < y[j]);
      const int32_t lo = takeX ? x[i] : y[j], hi = takeX ? x[i + 1] : y[j + 1];
      (takeX ? i : j) += 2;
      if (n > 0 && lo < out[n - 1]) {
        *dup = lo;
        return n;
      }
      if (n > 0 && lo == out[n - 1]) {
        out[n - 1] = hi;
      } else {
        out[n++] = lo;
        out[n++] = hi;
      }
    }
    return n;
  }

  struct Hash {
    size_t operator()(const std::vector<int32_t>& v) const {
      uint64_t h = 1469598103934665603ull;
      for (int32_t x : v) h = (h ^ static_cast<uint32_t>(x)) * 1099511628211ull;
      return static_cast<size_t>(h ^ (h >> 29));
    }
    size_t operator()(const std::pair<SetId, SetId>& k) const {
      return static_cast<size_t>((k.first * 0x9E3779B97F4A7C15ull) ^ (k.second + (k.second >> 31)));
    }
  };
  std::vector<std::vector<int32_t>> sets_;
  std::unordered_map<std::vector<int32_t>, SetId, Hash> ids_;
  std::unordered_map<std::pair<SetId, SetId>, std::pair<SetId, int>, Hash> unions_;
};

// ---- symbolic values ---------------------------------------------------------------

constexpr uint8_t kInit = 1;   // written (garbage otherwise)
constexpr uint8_t kRaw = 2;    // a rank's raw input: not yet scaled by PreMulSum
constexpr uint8_t kFinal = 4;  // the final operation (SumPostDiv) was applied

// A set id uses bits 0..59 and 63 (SetTable), so the flags go in bits 60..62
// and a value takes 12 bytes: at 4096 ranks an all-gather's or all-to-all's
// outputs alone are 16.7M values.
constexpr int kFlagShift = 60;
constexpr SetId kFlagBits = SetId(7) << kFlagShift;

#pragma pack(push, 4)
class Value {
 public:
  Value() = default;  // trivial, so that a Slot can hold one in a union; Value{} is all zero
  Value(SetId set, uint32_t index, uint8_t flags)
      : word_(set | static_cast<SetId>(flags) << kFlagShift), index(index) {}
  SetId set() const { return word_ & ~kFlagBits; }  // the contributing ranks
  uint8_t flags() const { return static_cast<uint8_t>((word_ & kFlagBits) >> kFlagShift); }
  void addFlags(uint8_t f) { word_ |= static_cast<SetId>(f) << kFlagShift; }
  void clearFlags(uint8_t f) { word_ &= ~(static_cast<SetId>(f) << kFlagShift); }

 private:
  SetId word_;

 public:
  uint32_t index;  // which input element the contributions are of
};
#pragma pack(pop)
static_assert(sizeof(Value) == 12, "keep Value small");

// ---- compiled steps ----------------------------------------------------------------

// What a step kind does, looked up once instead of per simulated step.
struct KindTraits {
  bool sends = false, receives = false, readsSrc = false, writesDst = false;
};
constexpr int kNumStepKinds = static_cast<int>(schedule::StepKind::Copy) + 1;

std::array<KindTraits, kNumStepKinds> makeTraits() {
  std::array<KindTraits, kNumStepKinds> t{};
  for (int i = 0; i < kNumStepKinds; ++i) {
    const schedule::StepKind k = static_cast<schedule::StepKind>(i);
    t[i] = {stepSends(k), stepReceives(k), stepReadsSrc(k), stepWritesDst(k)};
  }
  return t;
}
const std::array<KindTraits, kNumStepKinds> kTraits = makeTraits();
const KindTraits& traits(schedule::StepKind k) { return kTraits[static_cast<size_t>(k)]; }

constexpr uint8_t kContribution = 1, kFinalStep = 2;
constexpr uint32_t kNoFifo = UINT32_MAX;

// A compiled step is a run of 32-bit words holding only the fields its kind
// uses, so that an all-to-all's send or receive takes 12 bytes: at 4096 ranks
// there are 33.5M of them, and the simulation's cost is memory traffic.
//   word 0: kind:3 | srcBuf:2 | dstBuf:2 | flags:2 | wide:1 | count:22 (unless wide)
//   then: [count if wide] [srcOff if it reads src] [dstOff if it writes dst]
//         [receive FIFO if it receives] [send FIFO if it sends]
// The FIFO words first hold the position of the FIFO's key (Sim::fifoKey) in
// the rank's sorted key list, then, once all ranks are compiled, the global
// FIFO id.
constexpr uint32_t kWide = 1u << 9;
constexpr int kCountShift = 10;
constexpr uint32_t kMaxNarrowCount = (1u << (32 - kCountShift)) - 1;

struct CStep {
  schedule::StepKind kind = schedule::StepKind::Copy;
  schedule::Buffer srcBuf = schedule::Buffer::Input, dstBuf = schedule::Buffer::Output;
  uint8_t flags = 0;
  uint32_t count = 0, srcOff = 0, dstOff = 0;
  uint32_t recvFifo = kNoFifo, sendFifo = kNoFifo;
  uint32_t words = 0;                   // encoded length
  uint32_t recvWord = 0, sendWord = 0;  // where the FIFO words are in the encoding
};

uint32_t encodedWords(const schedule::Step& st) {
  const KindTraits& t = traits(st.kind);
  return 1 + (st.count > kMaxNarrowCount) + t.readsSrc + t.writesDst + t.receives + t.sends;
}

void encodeStep(const schedule::Step& st, uint32_t recvKey, uint32_t sendKey, std::vector<uint32_t>* code) {
  const KindTraits& t = traits(st.kind);
  const bool wide = st.count > kMaxNarrowCount;
  const uint32_t flags = (st.srcIsContribution ? kContribution : 0) | (st.final ? kFinalStep : 0);
  code->push_back(static_cast<uint32_t>(st.kind) | static_cast<uint32_t>(st.src.buffer) << 3 |
                  static_cast<uint32_t>(st.dst.buffer) << 5 | flags << 7 |
                  (wide ? kWide : static_cast<uint32_t>(st.count) << kCountShift));
  if (wide) code->push_back(static_cast<uint32_t>(st.count));
  if (t.readsSrc) code->push_back(static_cast<uint32_t>(st.src.offset));
  if (t.writesDst) code->push_back(static_cast<uint32_t>(st.dst.offset));
  if (t.receives) code->push_back(recvKey);
  if (t.sends) code->push_back(sendKey);
}

CStep decodeStep(const uint32_t* w) {
  CStep s;
  const uint32_t h = w[0];
  s.kind = static_cast<schedule::StepKind>(h & 7);
  s.srcBuf = static_cast<schedule::Buffer>((h >> 3) & 3);
  s.dstBuf = static_cast<schedule::Buffer>((h >> 5) & 3);
  s.flags = static_cast<uint8_t>((h >> 7) & 3);
  uint32_t n = 1;
  s.count = (h & kWide) ? w[n++] : h >> kCountShift;
  const KindTraits& t = traits(s.kind);
  if (t.readsSrc) s.srcOff = w[n++];
  if (t.writesDst) s.dstOff = w[n++];
  if (t.receives) {
    s.recvWord = n;
    s.recvFifo = w[n++];
  }
  if (t.sends) {
    s.sendWord = n;
    s.sendFifo = w[n++];
  }
  s.words = n;
  return s;
}

constexpr int32_t kMaxLaneIndex = (1 << 23) - 1;

struct CLane {
  uint32_t end = 0;   // one past the lane's last code word; it begins where the previous lane ends
  uint32_t next = 0;  // code word of the next step to run
  uint32_t time = 0;  // critical path length up to the lane's last step
  uint32_t index : 23;  // LaneKey::index
  uint32_t kind : 2;    // LaneKind
  uint32_t channel : 6;
  CLane() : index(0), kind(0), channel(0) {}
};
static_assert(sizeof(CLane) == 16, "keep CLane small");

// What a step uses comes first: two cache lines.
struct alignas(64) RankState {
  std::vector<uint32_t> code;  // the compiled steps of all lanes, lane after lane
  uint32_t firstLane = 0, nlanes = 0;  // the rank's lanes in Sim::lanes_
  // Output, or for in-place collectives the one allocation both buffers live in.
  std::vector<Value> user;
  std::vector<Value> scratch;
  size_t inBase = 0, outBase = 0;
  size_t sent = 0, reduced = 0;  // elements
  bool aliased = false;          // input is user[inBase...], not implicit
  size_t inSize = 0, outSize = 0, steps = 0;
  // Until the FIFOs are connected: the rank's distinct FIFO keys for each
  // direction, sorted, and the lane using each (the FIFO invariant); once
  // connectFifos has matched a receiving end, its FIFO id replaces its lane.
  std::vector<uint32_t> sendKeys, recvKeys;
  std::vector<int32_t> sendLane, recvLane;
  uint32_t sendBase = 0;  // FIFO id of sendKeys[0]: ids go sender by sender
};

// One per (from, to, channel) that a plan uses.
struct Fifo {
  uint16_t from, to;            // ranks are below 2^15
  uint16_t head, size;          // slots are below 2^16
  int32_t producer, consumer;  // lane indices on `from` and `to`, or -1
};

// Message j of a FIFO uses its slot j % nslots. A message of one element
// (all of them where a chunk is one element) is kept in the slot, longer
// ones in the arena, while they are in flight.
struct Slot {
  uint32_t len;
  // Critical path bookkeeping: when the message was sent, and when the
  // slot's previous message was received.
  uint32_t sentAt, freedAt;
  union {
    Value value;   // len == 1
    uint32_t pos;  // len > 1: arena_[pos, pos + len)
  };
};

// A FIFO and its first two slots fill one cache line: at 4096 ranks an
// all-to-all has 16.7M FIFOs, one message each, and a step costs what it
// misses in the cache. Further slots, if any, are in a table of their own.
struct alignas(64) FifoRecord {
  Fifo fifo;
  Slot slots[2];
};
static_assert(sizeof(FifoRecord) == 64, "one cache line per FIFO");

const char* laneKindName(schedule::LaneKind k) {
  return k == schedule::LaneKind::Channel ? "channel" : k == schedule::LaneKind::PeerSend ? "send-to" : "recv-from";
}

template <typename T>
void release(std::vector<T>* v) {
  std::vector<T>().swap(*v);
}

class Sim {
 public:
  Sim(const schedule::CollShape& shape, const CheckOptions& opts)
      : base_(shape), opts_(opts), ranks_(std::max(0, shape.nranks)) {}

  bool run(CheckStats* stats) {
    if (base_.nranks < 1 || base_.nranks > SetTable::kMaxRanks)
      return fail("nranks must be 1.." + std::to_string(SetTable::kMaxRanks));
    if (opts_.nslots < 1 || opts_.nslots > UINT16_MAX) return fail("nslots must be 1.." + std::to_string(UINT16_MAX));
    full_ = SetTable::interval(0, base_.nranks);
    sendAt_.assign(static_cast<size_t>(base_.nranks) << 6, kNoFifo);
    recvAt_.assign(static_cast<size_t>(base_.nranks) << 6, kNoFifo);
    for (int r = 0; r < base_.nranks; ++r)
      if (!compileRank(r)) return false;
    if (!connectFifos()) return false;
    if (!simulate()) return false;
    if (!verify()) return false;
    if (stats) fillStats(stats);
    return true;
  }

  const std::string& error() const { return error_; }

 private:
  // ---- set-up: buffers and plans ----

  size_t inputSize(int r) const {
    const size_t n = base_.count, p = base_.nranks;
    switch (base_.coll) {
      case schedule::Collective::Broadcast:
        return r == base_.root ? n : 0;
      case schedule::Collective::Scatter:
        return r == base_.root ? n * p : 0;
      case schedule::Collective::ReduceScatter:
      case schedule::Collective::AllToAll:
        return n * p;
      default:
        return n;
    }
  }

  size_t outputSize(int r) const {
    const size_t n = base_.count, p = base_.nranks;
    switch (base_.coll) {
      case schedule::Collective::Reduce:
        return r == base_.root ? n : 0;
      case schedule::Collective::Gather:
        return r == base_.root ? n * p : 0;
      case schedule::Collective::AllGather:
      case schedule::Collective::AllToAll:
        return n * p;
      default:
        return n;
    }
  }

  // Lays out the rank's buffers; in-place as NCCL defines it per collective.
  void setUpBuffers(int r, RankState* rs) {
    rs->inSize = inputSize(r);
    rs->outSize = outputSize(r);
    const size_t n = base_.count;
    rs->aliased = opts_.inPlace && rs->inSize > 0 && rs->outSize > 0 && base_.coll != schedule::Collective::AllToAll;
    if (!rs->aliased) {
      rs->user.assign(rs->outSize, Value{});
      return;
    }
    rs->user.assign(std::max(rs->inSize, rs->outSize), Value{});
    if (rs->inSize > rs->outSize) rs->outBase = (base_.coll == schedule::Collective::Scatter ? base_.root : r) * n;
    if (rs->outSize > rs->inSize) rs->inBase = (base_.coll == schedule::Collective::Gather ? base_.root : r) * n;
    for (size_t i = 0; i < rs->inSize; ++i) rs->user[rs->inBase + i] = rawInput(r, i);
  }

  static Value rawInput(int r, size_t i) {
    return Value{SetTable::interval(r, r + 1), static_cast<uint32_t>(i), static_cast<uint8_t>(kInit | kRaw)};
  }

  size_t bufferSize(const RankState& rs, schedule::Buffer b) const {
    return b == schedule::Buffer::Input ? rs.inSize : b == schedule::Buffer::Output ? rs.outSize : rs.scratch.size();
  }

  // A FIFO seen from one end: the other end's rank and the channel, channel
  // first, so that the keys of peer lanes (all on kPeerChannel) are a block of
  // nranks entries in sendAt_ and recvAt_. peer < nranks, channel <= 63.
  uint32_t fifoKey(int peer, int channel) const {
    return static_cast<uint32_t>(channel) * static_cast<uint32_t>(base_.nranks) + static_cast<uint32_t>(peer);
  }
  int keyPeer(uint32_t key) const { return static_cast<int>(key % static_cast<uint32_t>(base_.nranks)); }
  int keyChannel(uint32_t key) const { return static_cast<int>(key / static_cast<uint32_t>(base_.nranks)); }

  CLane& lane(int r, size_t l) { return lanes_[ranks_[r].firstLane + l]; }
  const CLane& lane(int r, size_t l) const { return lanes_[ranks_[r].firstLane + l]; }
  uint32_t laneBegin(int r, size_t l) const { return l ? lane(r, l - 1).end : 0; }

  // `step` counts the lane's steps from 0.
  std::string where(int r, size_t lane, size_t step) const {
    std::ostringstream os;
    os << "rank " << r;
    if (lane < ranks_[r].nlanes) {
      const CLane& l = this->lane(r, lane);
      os << " lane " << laneKindName(static_cast<schedule::LaneKind>(l.kind)) << " " << l.index << " step " << step;
    }
    return os.str();
  }

  // The number within its lane of the step at code word `word` (error paths only).
  size_t stepNumber(int r, size_t lane, uint32_t word) const {
    const RankState& rs = ranks_[r];
    size_t n = 0;
    for (uint32_t w = laneBegin(r, lane); w < word; w += decodeStep(&rs.code[w]).words) ++n;
    return n;
  }

  bool checkLane(int r, const schedule::Lane& lane) {
    const bool peer = lane.key.kind != schedule::LaneKind::Channel;
    if (peer ? lane.channel != schedule::kPeerChannel : (lane.channel < 0 || lane.channel >= schedule::kPeerChannel))
      return fail("rank " + std::to_string(r) + ": lane on channel " + std::to_string(lane.channel) +
                  (peer ? ", peer lanes use kPeerChannel" : ", channel lanes use 0..kPeerChannel-1"));
    if (lane.key.index < 0 || lane.key.index > kMaxLaneIndex)
      return fail("rank " + std::to_string(r) + ": lane index " + std::to_string(lane.key.index) +
                  " out of range 0.." + std::to_string(kMaxLaneIndex));
    for (const schedule::Step& s : lane.steps) {
      const bool foreign = (lane.key.kind == schedule::LaneKind::PeerSend &&
                            (traits(s.kind).receives || (traits(s.kind).sends && s.sendPeer != lane.key.index))) ||
                           (lane.key.kind == schedule::LaneKind::PeerRecv &&
                            (traits(s.kind).sends || (traits(s.kind).receives && s.recvPeer != lane.key.index)));
      if (foreign) return fail("rank " + std::to_string(r) + ": a peer lane uses another peer's FIFO");
    }
    return true;
  }

  bool checkStatic(int r, const RankState& rs, const schedule::Step& s, size_t lane, size_t step) {
    auto bad = [&](const std::string& what) { return fail(where(r, lane, step) + ": " + what); };
    const int p = base_.nranks;
    if (s.count == 0) return bad("an empty step");
    const bool moves = traits(s.kind).sends || traits(s.kind).receives;
    if (moves && s.count > base_.chunkElems)
      return bad(std::string(stepKindName(s.kind)) + " of " + std::to_string(s.count) +
                 " elements, more than one chunk (" + std::to_string(base_.chunkElems) + ")");
    if (traits(s.kind).sends && (s.sendPeer < 0 || s.sendPeer >= p)) return bad("sends to a rank out of range");
    if (traits(s.kind).receives && (s.recvPeer < 0 || s.recvPeer >= p))
      return bad("receives from a rank out of range");
    auto inRange = [&](schedule::BufferRef ref, const char* what) {
      const size_t size = bufferSize(rs, ref.buffer);
      if (ref.offset <= size && s.count <= size - ref.offset) return true;
      std::ostringstream os;
      const char* name = ref.buffer == schedule::Buffer::Input    ? "input"
                         : ref.buffer == schedule::Buffer::Output ? "output"
                                                        : "scratch";
      os << what << " " << name << "+" << ref.offset << " n=" << s.count << " is outside the buffer of " << size
         << " elements";
      return bad(os.str());
    };
    if (traits(s.kind).readsSrc && !inRange(s.src, "source")) return false;
    if (traits(s.kind).writesDst && !inRange(s.dst, "destination")) return false;
    if (!isReduction(base_.coll) && (s.srcIsContribution || s.final))
      return bad("contribution or final flag in a collective that does not reduce");
    if (s.srcIsContribution && !traits(s.kind).readsSrc) return bad("contribution flag on a step without a source");
    if (s.src.offset + s.count > UINT32_MAX || s.dst.offset + s.count > UINT32_MAX || s.count > UINT32_MAX)
      return bad("offsets beyond 32 bits: too large for the checker");
    return true;
  }

  // Generates the rank's plan (only this rank's is alive at a time), checks
  // what can be checked without running it, and compiles it.
  bool compileRank(int r) {
    schedule::CollShape s = base_;
    s.rank = r;
    schedule::Plan plan = generatePlan(s);
    if (opts_.mutate) opts_.mutate(r, &plan);
    RankState& rs = ranks_[r];
    setUpBuffers(r, &rs);
    rs.scratch.assign(plan.scratchElems, Value{});
    collectFifoKeys(plan, &rs);
    size_t words = 0;
    for (const schedule::Lane& lane : plan.lanes)
      for (const schedule::Step& st : lane.steps) words += encodedWords(st);
    if (words > UINT32_MAX) return fail("rank " + std::to_string(r) + ": plan too large for the checker");
    rs.code.reserve(words);
    if (lanes_.size() + plan.lanes.size() > UINT32_MAX) return fail("too many lanes for the checker");
    rs.firstLane = static_cast<uint32_t>(lanes_.size());
    for (const schedule::Lane& lane : plan.lanes)
      if (!compileLane(r, lane)) return false;
    // All ranks' lanes in one array keep those of neighbouring ranks in the
    // same cache lines, which is what the round-robin simulation visits. Most
    // ranks have as many lanes as rank 0; the reserve costs no memory until used.
    if (r == 0) lanes_.reserve(std::min<size_t>(lanes_.size() * base_.nranks, size_t(1) << 26));
    return distinctLaneKeys(r, plan);
  }

  // The rank's distinct FIFO keys per direction, sorted, and where each is in
  // its list (sendAt_, recvAt_). Steps with a peer out of range are left to
  // checkStatic.
  void collectFifoKeys(const schedule::Plan& plan, RankState* rs) {
    auto add = [](std::vector<uint32_t>* keys, uint32_t key) {
      // Runs of one peer are common (rings use one FIFO per direction).
      if (keys->empty() || keys->back() != key) keys->push_back(key);
    };
    auto valid = [&](int peer) { return peer >= 0 && peer < base_.nranks; };
    for (const schedule::Lane& lane : plan.lanes) {
      if (lane.channel < 0 || lane.channel > schedule::kPeerChannel) continue;
      for (const schedule::Step& st : lane.steps) {
        if (traits(st.kind).receives && valid(st.recvPeer)) add(&rs->recvKeys, fifoKey(st.recvPeer, lane.channel));
        if (traits(st.kind).sends && valid(st.sendPeer)) add(&rs->sendKeys, fifoKey(st.sendPeer, lane.channel));
      }
    }
    for (std::vector<uint32_t>* keys : {&rs->sendKeys, &rs->recvKeys}) {
      sortRuns(keys);
      keys->erase(std::unique(keys->begin(), keys->end()), keys->end());
      keys->shrink_to_fit();
    }
    for (uint32_t j = 0; j < rs->sendKeys.size(); ++j) sendAt_[rs->sendKeys[j]] = j;
    for (uint32_t j = 0; j < rs->recvKeys.size(); ++j) recvAt_[rs->recvKeys[j]] = j;
    rs->sendLane.assign(rs->sendKeys.size(), -1);
    rs->recvLane.assign(rs->recvKeys.size(), -1);
  }

  // Sorts a list that usually is one or two monotone runs, which std::sort
  // handles badly: an all-to-all's destinations go up from rank + 1 and wrap
  // around, its sources go down.
  static void sortRuns(std::vector<uint32_t>* v) {
    if (v->size() > 1 && (*v)[0] > (*v)[1]) std::reverse(v->begin(), v->end());
    const auto mid = std::is_sorted_until(v->begin(), v->end());
    if (mid == v->end()) return;
    if (std::is_sorted(mid, v->end()))
      std::inplace_merge(v->begin(), mid, v->end());
    else
      std::sort(v->begin(), v->end());
  }

  bool distinctLaneKeys(int r, const schedule::Plan& plan) {
    std::vector<uint32_t> byKind[3];
    for (const schedule::Lane& lane : plan.lanes) byKind[static_cast<int>(lane.key.kind)].push_back(lane.key.index);
    for (std::vector<uint32_t>& keys : byKind) {
      sortRuns(&keys);
      if (std::adjacent_find(keys.begin(), keys.end()) != keys.end())
        return fail("rank " + std::to_string(r) + ": two lanes with the same key");
    }
    return true;
  }

  // Compiles the lane's steps, their FIFO words holding the keys' positions in
  // the rank's lists, and proves the FIFO invariant: one lane per FIFO end.
  bool compileLane(int r, const schedule::Lane& lane) {
    if (!checkLane(r, lane)) return false;
    RankState& rs = ranks_[r];
    CLane cl;
    cl.index = static_cast<uint32_t>(lane.key.index);
    cl.kind = static_cast<uint32_t>(lane.key.kind);
    cl.channel = static_cast<uint32_t>(lane.channel);
    cl.next = static_cast<uint32_t>(rs.code.size());
    const size_t laneIndex = rs.nlanes++;
    lanes_.push_back(cl);
    for (size_t k = 0; k < lane.steps.size(); ++k) {
      const schedule::Step& st = lane.steps[k];
      if (!checkStatic(r, rs, st, laneIndex, k)) return false;
      uint32_t recvAt = kNoFifo, sendAt = kNoFifo;
      if (traits(st.kind).sends) {
        const uint32_t key = fifoKey(st.sendPeer, lane.channel);
        sendAt = sendAt_[key];
        if (!claim(r, laneIndex, &rs.sendLane[sendAt], key, true)) return false;
      }
      if (traits(st.kind).receives) {
        const uint32_t key = fifoKey(st.recvPeer, lane.channel);
        recvAt = recvAt_[key];
        if (!claim(r, laneIndex, &rs.recvLane[recvAt], key, false)) return false;
      }
      encodeStep(st, recvAt, sendAt, &rs.code);
    }
    rs.steps += lane.steps.size();
    lanes_.back().end = static_cast<uint32_t>(rs.code.size());
    return true;
  }

  bool claim(int r, size_t lane, int32_t* owner, uint32_t key, bool sending) {
    if (*owner < 0 || *owner == static_cast<int32_t>(lane)) {
      *owner = static_cast<int32_t>(lane);
      return true;
    }
    std::ostringstream os;
    os << where(r, lane, 0) << " and lane " << *owner << " both " << (sending ? "send to rank " : "receive from rank ")
       << keyPeer(key) << " on channel " << keyChannel(key) << " (FIFO invariant)";
    return fail(os.str());
  }

  // Numbers the FIFOs sender by sender and finds each one's receiving end: a
  // merge, since every rank's keys are sorted. Senders are visited channel by
  // channel, rank by rank, so that every receiver meets its keys (channel,
  // sender) in order and one cursor per receiver suffices. A receive that no
  // rank sends gets a FIFO of its own, on which the simulation finds it
  // waiting forever.
  bool connectFifos() {
    size_t total = 0;
    for (RankState& rs : ranks_) {
      rs.sendBase = static_cast<uint32_t>(std::min<size_t>(total, kNoFifo));
      total += rs.sendKeys.size();
    }
    if (total >= kNoFifo) return fail("too many FIFOs for the checker");
    fifoRecords_.resize(total);
    orphans_.clear();
    std::vector<uint32_t> cursor(ranks_.size(), 0), sent(ranks_.size(), 0);
    for (int channel = 0; channel <= schedule::kPeerChannel; ++channel)
      for (int q = 0; q < base_.nranks; ++q) {
        const RankState& src = ranks_[q];
        for (uint32_t& i = sent[q]; i < src.sendKeys.size() && keyChannel(src.sendKeys[i]) == channel; ++i)
          connectSend(q, i, &cursor);
      }
    for (int r = 0; r < base_.nranks; ++r)
      while (cursor[r] < ranks_[r].recvKeys.size()) addOrphan(r, cursor[r]++);
    if (total + orphans_.size() >= static_cast<size_t>(INT32_MAX)) return fail("too many FIFOs for the checker");
    fifoRecords_.resize(total + orphans_.size());
    for (size_t i = 0; i < orphans_.size(); ++i) fifo(static_cast<uint32_t>(total + i)) = orphans_[i];
    release(&orphans_);
    extraSlots_.resize(fifoRecords_.size() * (std::max(2, opts_.nslots) - 2));
    for (RankState& rs : ranks_) giveFifoIds(&rs);
    return true;
  }

  // Makes the FIFO of rank q's sending end i and matches it to its receiving
  // end, if the receiver has one; receiving ends passed on the way have none.
  void connectSend(int q, uint32_t i, std::vector<uint32_t>* cursor) {
    const RankState& src = ranks_[q];
    const uint32_t id = src.sendBase + i;
    const int to = keyPeer(src.sendKeys[i]);
    Fifo& f = fifo(id);
    f = Fifo{static_cast<uint16_t>(q), static_cast<uint16_t>(to), 0, 0, src.sendLane[i], -1};
    RankState& dst = ranks_[to];
    const uint32_t want = fifoKey(q, keyChannel(src.sendKeys[i]));
    uint32_t& c = (*cursor)[to];
    while (c < dst.recvKeys.size() && dst.recvKeys[c] < want) addOrphan(to, c++);
    if (c < dst.recvKeys.size() && dst.recvKeys[c] == want) {
      f.consumer = dst.recvLane[c];
      dst.recvLane[c++] = static_cast<int32_t>(id);
    }
  }

  // Receiving end j of rank r has no sender: its lane gets a FIFO of its own,
  // numbered after all the others.
  void addOrphan(int r, size_t j) {
    RankState& rs = ranks_[r];
    orphans_.push_back(
        Fifo{static_cast<uint16_t>(keyPeer(rs.recvKeys[j])), static_cast<uint16_t>(r), 0, 0, -1, rs.recvLane[j]});
    rs.recvLane[j] = static_cast<int32_t>(fifoRecords_.size() + orphans_.size() - 1);
  }

  // Key positions in the code become FIFO ids; the key lists are done.
  void giveFifoIds(RankState* rs) {
    for (uint32_t w = 0; w < rs->code.size();) {
      const CStep s = decodeStep(&rs->code[w]);
      if (s.recvFifo != kNoFifo) rs->code[w + s.recvWord] = static_cast<uint32_t>(rs->recvLane[s.recvFifo]);
      if (s.sendFifo != kNoFifo) rs->code[w + s.sendWord] = rs->sendBase + s.sendFifo;
      w += s.words;
    }
    release(&rs->sendKeys);
    release(&rs->recvKeys);
    release(&rs->sendLane);
    release(&rs->recvLane);
  }

  // ---- running ----

  Value load(int r, schedule::Buffer b, size_t off) const {
    const RankState& rs = ranks_[r];
    switch (b) {
      case schedule::Buffer::Input:
        return rs.aliased ? rs.user[rs.inBase + off] : rawInput(r, off);
      case schedule::Buffer::Output:
        return rs.user[rs.outBase + off];
      case schedule::Buffer::Scratch:
        return rs.scratch[off];
    }
    return {};
  }

  void store(int r, schedule::Buffer b, size_t off, const Value& v) {
    RankState& rs = ranks_[r];
    if (b == schedule::Buffer::Scratch)
      rs.scratch[off] = v;
    else
      rs.user[(b == schedule::Buffer::Input ? rs.inBase : rs.outBase) + off] = v;
  }

  enum class Outcome { Ran, Blocked, Failed };

  // The value step `s` (at code word `word` of the lane) produces for element
  // i, from what it received and read.
  bool combine(int r, size_t lane, uint32_t word, const CStep& s, const Value* received, size_t i, Value* out) {
    auto fail = [&](const std::string& what) {
      return this->fail(where(r, lane, stepNumber(r, lane, word)) + " (" + stepKindName(s.kind) + ")" + what);
    };
    const bool reduction = isReduction(base_.coll);
    Value v;
    if (traits(s.kind).readsSrc) {
      v = load(r, s.srcBuf, s.srcOff + i);
      if (!(v.flags() & kInit)) return fail(" reads an element nothing has written");
      const bool contribution = s.flags & kContribution;
      if (reduction && contribution && !(v.flags() & kRaw))
        return fail(" flags its source as a contribution but it is not the rank's raw input");
      if (reduction && !contribution && (v.flags() & kRaw))
        return fail(" reads the rank's raw input without the contribution flag");
      if (contribution) v.clearFlags(kRaw);
      if (received) {
        if (received->index != v.index)
          return fail(" reduces input element " + std::to_string(received->index) + " with element " +
                      std::to_string(v.index));
        if ((received->flags() | v.flags()) & kFinal)
          return fail(" reduces a value that already had the final operation");
        int dup = -1;
        SetId set = 0;
        if (!sets_.unite(received->set(), v.set(), &set, &dup))
          return fail(" counts rank " + std::to_string(dup) + "'s contribution twice");
        v = Value{set, v.index, kInit};
      }
    } else {
      v = *received;
    }
    if (s.flags & kFinalStep) {
      if (v.flags() & kFinal) return fail(" applies the final operation twice");
      if (v.set() != full_) return fail(" applies the final operation to a partial sum " + sets_.describe(v.set()));
      v.addFlags(kFinal);
    }
    *out = v;
    return true;
  }

  Fifo& fifo(uint32_t id) { return fifoRecords_[id].fifo; }
  const Fifo& fifo(uint32_t id) const { return fifoRecords_[id].fifo; }
  Slot& slot(uint32_t id, uint32_t k) {
    if (k < 2) return fifoRecords_[id].slots[k];
    return extraSlots_[static_cast<size_t>(id) * (opts_.nslots - 2) + (k - 2)];
  }

  Outcome tryStep(int r, uint32_t laneIndex) {
    RankState& rs = ranks_[r];
    CLane& lane = this->lane(r, laneIndex);
    const uint32_t word = lane.next;
    const CStep s = decodeStep(&rs.code[word]);
    const uint32_t nslots = static_cast<uint32_t>(opts_.nslots);
    Fifo* in = s.recvFifo != kNoFifo ? &fifo(s.recvFifo) : nullptr;
    Fifo* out = s.sendFifo != kNoFifo ? &fifo(s.sendFifo) : nullptr;
    if (in && in->size == 0) return Outcome::Blocked;
    if (out && out->size >= nslots) return Outcome::Blocked;
    Slot* inSlot = in ? &slot(s.recvFifo, in->head) : nullptr;
    const uint32_t recvLen = inSlot ? inSlot->len : 0;
    if (inSlot && recvLen != s.count) {
      std::ostringstream os;
      os << where(r, laneIndex, stepNumber(r, laneIndex, word)) << " (" << stepKindName(s.kind) << ") expects "
         << s.count << " elements from rank " << in->from << " but the message holds " << recvLen;
      fail(os.str());
      return Outcome::Failed;
    }
    result_.resize(s.count);
    const Value* msg = !inSlot ? nullptr : recvLen == 1 ? &inSlot->value : &arena_[inSlot->pos];
    for (size_t i = 0; i < s.count; ++i)
      if (!combine(r, laneIndex, word, s, msg ? msg + i : nullptr, i, &result_[i])) return Outcome::Failed;
    if (traits(s.kind).writesDst)
      for (size_t i = 0; i < s.count; ++i) store(r, s.dstBuf, s.dstOff + i, result_[i]);
    // A step that receives takes one unit of time (one alpha: a message's
    // latency) once its lane, its message and its slot are there; sending and
    // copying alone wait for no message and take none. The send slot is
    // (head + size) % nslots, the same before and after the receive below.
    Slot* outSlot = out ? &slot(s.sendFifo, (out->head + out->size) % nslots) : nullptr;
    uint32_t t = lane.time;
    if (inSlot) t = std::max(t, inSlot->sentAt);
    if (outSlot) t = std::max(t, outSlot->freedAt);
    if (in) ++t;
    lane.time = t;
    criticalPath_ = std::max(criticalPath_, t);
    if (in) {
      inSlot->freedAt = t;
      if (recvLen > 1) freeList(recvLen).push_back(inSlot->pos);
      in->head = static_cast<uint16_t>((in->head + 1) % nslots);
      --in->size;
      wake(in->from, in->producer);
    }
    if (out) {
      if (s.count == 1) {
        outSlot->value = result_[0];
      } else {
        uint32_t pos = 0;
        if (!allocElements(s.count, &pos)) return Outcome::Failed;
        std::copy(result_.begin(), result_.end(), arena_.begin() + pos);
        outSlot->pos = pos;
      }
      outSlot->len = s.count;
      outSlot->sentAt = t;
      ++out->size;
      elementsMoved_ += s.count;
      rs.sent += s.count;
      wake(out->to, out->consumer);
    }
    if (in && traits(s.kind).readsSrc) rs.reduced += s.count;
    lane.next += s.words;
    return Outcome::Ran;
  }

  // Free arena blocks by length: messages of one plan come in few lengths.
  std::vector<uint32_t>& freeList(uint32_t len) {
    if (len < smallFree_.size()) return smallFree_[len];
    return largeFree_[len];
  }

  bool allocElements(uint32_t len, uint32_t* pos) {
    std::vector<uint32_t>& free = freeList(len);
    if (!free.empty()) {
      *pos = free.back();
      free.pop_back();
      return true;
    }
    if (arena_.size() + len > UINT32_MAX) return fail("more elements in flight than the checker can hold");
    *pos = static_cast<uint32_t>(arena_.size());
    arena_.resize(arena_.size() + len);
    return true;
  }

  static constexpr uint64_t kQueued = 1, kFinished = 2;

  uint64_t laneBits(int r, uint32_t lane) const {
    const size_t id = ranks_[r].firstLane + lane;
    return (laneBits_[id / 32] >> (id % 32 * 2)) & 3;
  }
  void setLaneBits(int r, uint32_t lane, uint64_t bits) {
    const size_t id = ranks_[r].firstLane + lane;
    uint64_t& word = laneBits_[id / 32];
    word = (word & ~(uint64_t(3) << (id % 32 * 2))) | bits << (id % 32 * 2);
  }

  // Every lane with steps starts queued: the initial work queue.
  void initLaneBits() {
    laneBits_.assign(lanes_.size() / 32 + 1, 0);
    for (int r = 0; r < base_.nranks; ++r)
      for (uint32_t l = 0; l < ranks_[r].nlanes; ++l) {
        const CLane& c = lane(r, l);
        setLaneBits(r, l, c.next < c.end ? kQueued : kFinished);
      }
  }

  void wake(int r, int32_t lane) {
    if (lane < 0 || laneBits(r, static_cast<uint32_t>(lane)) != 0) return;
    setLaneBits(r, static_cast<uint32_t>(lane), kQueued);
    work_.push_back({r, lane});
  }

  // Runs as many steps as are ready; lanes of others are woken as FIFOs change.
  bool runLane(int r, uint32_t lane) {
    CLane& l = this->lane(r, lane);
    setLaneBits(r, lane, 0);
    while (l.next < l.end) {
      const Outcome o = tryStep(r, lane);
      if (o == Outcome::Failed) return false;
      if (o == Outcome::Blocked) return true;
    }
    setLaneBits(r, lane, kFinished);
    return true;
  }

  // The work queue starts as every lane with steps, in rank and lane order
  // (those lanes are marked queued by initLaneBits); woken lanes join behind.
  // The initial part is walked in place rather than copied into work_.
  bool runFirstInFirstOut() {
    for (int r = 0; r < base_.nranks; ++r)
      for (uint32_t l = 0; l < ranks_[r].nlanes; ++l)
        if (laneBits(r, l) == kQueued && !runLane(r, l)) return false;
    for (size_t head = 0; head < work_.size();) {
      const auto [r, lane] = work_[head++];
      if (head > 4096 && head * 2 > work_.size()) {
        work_.erase(work_.begin(), work_.begin() + static_cast<std::ptrdiff_t>(head));
        head = 0;
      }
      if (!runLane(r, static_cast<uint32_t>(lane))) return false;
    }
    return true;
  }

  // The same queue used as a stack: woken lanes first, then the initial lanes
  // from the last rank's last lane backwards.
  bool runLastInFirstOut() {
    int r = base_.nranks - 1;
    size_t l = ranks_[r].nlanes;
    for (;;) {
      if (!work_.empty()) {
        const auto [wr, lane] = work_.back();
        work_.pop_back();
        if (!runLane(wr, static_cast<uint32_t>(lane))) return false;
        continue;
      }
      // Lanes below the walk are untouched, so queued means still initial.
      do {
        while (l == 0) {
          if (r == 0) return true;
          l = ranks_[--r].nlanes;
        }
        --l;
      } while (laneBits(r, static_cast<uint32_t>(l)) != kQueued);
      if (!runLane(r, static_cast<uint32_t>(l))) return false;
    }
  }

  bool simulate() {
    smallFree_.resize(std::min<size_t>(base_.chunkElems, 4096) + 1);
    initLaneBits();
    if (!(opts_.lifo ? runLastInFirstOut() : runFirstInFirstOut())) return false;
    std::string stuck = describeStuck();
    if (!stuck.empty()) return fail("deadlock with " + std::to_string(opts_.nslots) + "-slot FIFOs: " + stuck);
    for (const FifoRecord& rec : fifoRecords_)
      if (const Fifo& f = rec.fifo; f.size > 0)
        return fail("rank " + std::to_string(f.from) + " sent rank " + std::to_string(f.to) + " on channel " +
                    std::to_string(lane(f.from, f.producer).channel) + " a message that was never received");
    return true;
  }

  std::string describeStuck() const {
    std::ostringstream os;
    int shown = 0;
    for (int r = 0; r < base_.nranks && shown < 8; ++r)
      for (size_t l = 0; l < ranks_[r].nlanes && shown < 8; ++l) {
        const CLane& lane = this->lane(r, l);
        if (lane.next == lane.end) continue;
        const CStep s = decodeStep(&ranks_[r].code[lane.next]);
        os << where(r, l, stepNumber(r, l, lane.next)) << " at " << stepKindName(s.kind);
        if (s.recvFifo != kNoFifo && fifo(s.recvFifo).size == 0)
          os << " waiting for rank " << fifo(s.recvFifo).from;
        else if (s.sendFifo != kNoFifo)
          os << " with a full FIFO to rank " << fifo(s.sendFifo).to;
        os << "; ";
        ++shown;
      }
    return os.str();
  }

  // ---- the result ----

  // What output element i of rank r must hold.
  Value expected(int r, size_t i) const {
    const int root = base_.root;
    const size_t n = base_.count;
    auto one = [](size_t from, size_t index) {
      const int rank = static_cast<int>(from);
      return Value{SetTable::interval(rank, rank + 1), static_cast<uint32_t>(index), kInit};
    };
    switch (base_.coll) {
      case schedule::Collective::AllReduce:
      case schedule::Collective::Reduce:
        return Value{full_, static_cast<uint32_t>(i), kInit | kFinal};
      case schedule::Collective::ReduceScatter:
        return Value{full_, static_cast<uint32_t>(r * n + i), kInit | kFinal};
      case schedule::Collective::AllGather:
      case schedule::Collective::Gather:
        return one(i / n, i % n);
      case schedule::Collective::Broadcast:
        return one(root, i);
      case schedule::Collective::AllToAll:
        return one(i / n, r * n + i % n);
      case schedule::Collective::Scatter:
        return one(root, r * n + i);
      default:
        return {};
    }
  }

  bool verify() {
    const bool reduction = isReduction(base_.coll);
    for (int r = 0; r < base_.nranks; ++r) {
      const RankState& rs = ranks_[r];
      for (size_t i = 0; i < rs.outSize; ++i) {
        const Value want = expected(r, i);
        const Value got = rs.user[rs.outBase + i];
        const bool right = (got.flags() & kInit) && got.index == want.index && got.set() == want.set();
        if (right && (!reduction || (got.flags() & kFinal))) continue;
        std::ostringstream os;
        os << "rank " << r << " output[" << i << "] ";
        if (!(got.flags() & kInit)) return fail(os.str() + "was never written");
        if (!right) {
          os << "holds element " << got.index << " of ranks " << sets_.describe(got.set()) << ", expected element "
             << want.index << " of ranks " << sets_.describe(want.set());
          return fail(os.str());
        }
        if (reduction && !(got.flags() & kFinal)) return fail(os.str() + "was written without the final operation");
      }
    }
    return true;
  }

  void fillStats(CheckStats* st) const {
    *st = {};
    for (const RankState& rs : ranks_) {
      st->steps += rs.steps;
      st->maxStepsPerRank = std::max(st->maxStepsPerRank, rs.steps);
      st->maxLanesPerRank = std::max(st->maxLanesPerRank, static_cast<size_t>(rs.nlanes));
      st->maxScratchElems = std::max(st->maxScratchElems, rs.scratch.size());
      st->maxSentPerRank = std::max(st->maxSentPerRank, rs.sent);
      st->maxReducedPerRank = std::max(st->maxReducedPerRank, rs.reduced);
    }
    st->elementsMoved = elementsMoved_;
    st->criticalPathSteps = criticalPath_;
  }

  bool fail(const std::string& what) {
    if (error_.empty()) error_ = what;
    return false;
  }

  schedule::CollShape base_;
  CheckOptions opts_;
  SetTable sets_;
  SetId full_ = 0;
  std::vector<RankState> ranks_;
  std::vector<uint32_t> sendAt_, recvAt_;  // FIFO key -> position in the compiled rank's key list
  std::vector<FifoRecord> fifoRecords_;
  std::vector<Fifo> orphans_;     // while connecting: FIFOs of receives nobody sends
  std::vector<Slot> extraSlots_;  // slots 2.. of each FIFO
  std::vector<CLane> lanes_;  // all ranks', rank after rank
  // Two bits per lane of lanes_: queued (to run, in work_ or the initial
  // walk), finished. Waking a lane looks only here, not at the lane, which at
  // 4096 ranks is one cache miss less per message.
  std::vector<uint64_t> laneBits_;
  std::vector<Value> arena_;  // the elements of messages in flight
  std::vector<std::vector<uint32_t>> smallFree_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> largeFree_;
  std::vector<std::pair<int, int32_t>> work_;
  std::vector<Value> result_;
  size_t elementsMoved_ = 0;
  uint32_t criticalPath_ = 0;
  std::string error_;
};

// Checking generates every rank's plan in turn, and glibc's adaptive
// thresholds map and unmap the same blocks for each one: a page fault per
// 4 KiB every time, 1.8 of the 2.1 s it takes to generate the plans of a
// 4096-rank ring all-gather (measured). The checker is a test tool, so it
// keeps freed memory in the process instead.
void keepFreedMemory() {
#ifdef __GLIBC__
  static const bool done = [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the largest glibc accepts
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    return true;
  }();
  (void)done;
#endif
}

}  // namespace

std::string describeShape(const schedule::CollShape& s) {
  std::ostringstream os;
  os << collectiveName(s.coll) << "/" << algorithmName(s.algorithm) << " nranks=" << s.nranks
     << " count=" << s.count << " root=" << s.root << " chunk=" << s.chunkElems << " channels=" << s.nchannels;
  if (s.order && !s.order->identity()) {
    os << " order=";
    for (size_t i = 0; i < s.order->rankAt.size(); ++i) os << (i ? "," : "") << s.order->rankAt[i];
  }
  return os.str();
}

std::string checkCollective(const schedule::CollShape& shape, const CheckOptions& opts, CheckStats* stats) {
  keepFreedMemory();
  if (shape.algorithm == schedule::Algorithm::PeerAccess && algorithmSupports(shape.algorithm, shape.coll)) {
    const std::string why = checkPeerAccessPlans(shape, opts, stats);
    return why.empty() ? "" : describeShape(shape) + (opts.inPlace ? " in-place" : "") + ": " + why;
  }
  Sim sim(shape, opts);
  if (sim.run(stats)) return "";
  return describeShape(shape) + (opts.inPlace ? " in-place" : "") + ": " + sim.error();
}

}  // namespace braid
