#include "tuning/planner.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>

#include "base/log.h"
#include "reduce/host_reduce.h"

namespace braid::tuning {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Ring is the reference schedule (neighbour traffic only, fused steps): another
// family must be predicted this much faster to replace it, so model noise near
// a tie does not flip the choice.
constexpr double kRingPreference = 1.05;

// Pipelines gain nothing from chunks below this; it bounds the search.
constexpr size_t kMinChunkBytes = 1024;

// The chunk sizes a protocol stands for (see Protocol in algo_env.h), in bytes,
// clamped to the slot.
struct ChunkRange {
  size_t lo;  // exclusive, except that hi == lo is the single size hi
  size_t hi;
};

ChunkRange protocolRange(Protocol p, size_t slot) {
  const size_t ll = std::min<size_t>(8 << 10, slot), ll128 = std::min<size_t>(64 << 10, slot);
  switch (p) {
    case Protocol::LL: return {0, ll};
    case Protocol::LL128: return {ll, ll128};
    case Protocol::Simple: return {ll128, slot};
  }
  return {0, slot};
}

// Warns once per collective per process that the user's filter left nothing.
void warnEmptyFilter(schedule::Collective c, bool proto) {
  static std::atomic<uint32_t> warned{0};
  const char* var = proto ? "NCCL_PROTO" : "NCCL_ALGO";
  const uint32_t bit = 1u << (static_cast<int>(c) + (proto ? 16 : 0));
  if (warned.fetch_or(bit) & bit) return;
  BRAID_WARN("%s leaves no usable choice for %s; the cost model chooses instead", var,
             collectiveName(c));
}

// Bytes an element takes on the wire: its type's, or its wire type's code.
size_t bytesPerElem(const TuningInput& in) {
  if (in.wire != reduce::WireType::None) return wireCodeBytes(in.wire);
  return std::max<size_t>(1, reduce::typeSize(in.datatype));
}

// Elements of a message of at most `bytes` (a wire type's groups carry headers).
size_t elemsFitting(const TuningInput& in, size_t bytes, size_t elemSize) {
  if (in.wire != reduce::WireType::None) return size_t(wireCountFitting(in.wire, bytes));
  return bytes / elemSize;
}

struct Best {
  double seconds = kInf;
  size_t chunkElems = 1;
  Protocol protocol = Protocol::Simple;
};

// The best chunk for one algorithm within the allowed protocols.
Best bestChunk(const TuningInput& in, schedule::Algorithm algo, uint8_t protos, const CostParams& params,
               size_t elemSize, double n) {
  Best best;
  schedule::ModelShape shape;
  shape.nranks = in.nranks;
  shape.bytes = n;
  shape.nchannels = in.nchannels;
  const bool pipelined = isPipelined(in.coll, algo);
  // Every chunk of the whole message or more costs the same, whatever the
  // protocol (one chunk a step; test
  // CostModel.ChunksOfTheWholeMessageOrMoreCostTheSame), and a tie keeps the
  // first: a small call prices one such size, not each.
  bool pricedWhole = false;
  for (int pi = 0; pi < kNumProtocols; ++pi) {
    if (!((protos >> pi) & 1)) continue;
    const Protocol proto = static_cast<Protocol>(pi);
    const ChunkRange r = protocolRange(proto, in.slotBytes);
    for (size_t bytes = r.hi;; bytes /= 2) {
      const size_t elems = std::max<size_t>(1, elemsFitting(in, bytes, elemSize));
      shape.chunkBytes = static_cast<double>(elems * elemSize);
      const bool whole = shape.chunkBytes >= n;
      if (!(whole && pricedWhole)) {
        const double t = predictSeconds(in.coll, algo, shape, params);
        if (t < best.seconds) best = {t, elems, proto};
        pricedWhole = pricedWhole || whole;
      }
      if (!pipelined || bytes / 2 <= r.lo || bytes / 2 < kMinChunkBytes) break;
    }
  }
  return best;
}

// The algorithms with a formula for `c`, one bit each: every row of the
// schedule table carries its formula.
uint8_t modelled(schedule::Collective c) {
  uint8_t m = 0;
  for (int a = 0; a < schedule::kNumAlgorithms; ++a)
    if (schedule::findSchedule(c, static_cast<schedule::Algorithm>(a)) != nullptr) m |= uint8_t(1u << a);
  return m;
}

}  // namespace

PlanChoice choosePlanAmong(const TuningInput& in, uint8_t implemented, double* perAlgorithm) {
  const AlgoFilter& filter = in.filter ? *in.filter : envAlgoFilter();
  const CalibrationParams& cal = *in.calibration;
  const int ci = static_cast<int>(in.coll);
  const size_t elemSize = bytesPerElem(in);
  const CostParams params = costParams(cal, in.transport, in.datatype);
  const double n = modelBytes(in.coll, in.count, elemSize, in.nranks);

  PlanChoice choice;
  choice.nchannels = std::max(1, in.nchannels);
  uint8_t algos = implemented & modelled(in.coll);
  if (algos & filter.algos[ci]) {
    algos &= filter.algos[ci];
    choice.forced = filter.algoForced[ci];
  } else if (filter.algoForced[ci] && algos) {
    warnEmptyFilter(in.coll, false);
  }
  uint8_t protos = filter.protos[ci];
  if (protos) {
    choice.forced = choice.forced || filter.protoForced[ci];
  } else {
    warnEmptyFilter(in.coll, true);
    protos = (1u << kNumProtocols) - 1;
  }

  Best best[schedule::kNumAlgorithms];
  int winner = -1;
  for (int a = 0; a < schedule::kNumAlgorithms; ++a) {
    if ((algos >> a) & 1) best[a] = bestChunk(in, static_cast<schedule::Algorithm>(a), protos, params, elemSize, n);
    if (perAlgorithm) perAlgorithm[a] = best[a].seconds;
    if (best[a].seconds < kInf && (winner < 0 || best[a].seconds < best[winner].seconds)) winner = a;
  }
  const int ring = static_cast<int>(schedule::Algorithm::Ring);
  if (winner >= 0 && best[ring].seconds <= best[winner].seconds * kRingPreference) winner = ring;
  if (winner < 0) {
    // Nothing modelled is implemented (cannot happen with the shipped tables):
    // keep the generators' defaults, one slot per step.
    choice.algorithm = (implemented >> ring) & 1 ? schedule::Algorithm::Ring : schedule::Algorithm::Direct;
    choice.chunkElems = std::max<size_t>(1, elemsFitting(in, in.slotBytes, elemSize));
    return choice;
  }
  choice.algorithm = static_cast<schedule::Algorithm>(winner);
  choice.chunkElems = best[winner].chunkElems;
  choice.protocol = best[winner].protocol;
  choice.predictedSeconds = best[winner].seconds;
  return choice;
}

bool laneUsesLL(const TuningInput& in, uint64_t opBytes, uint64_t llPayloadBytes) {
  if (opBytes > llPayloadBytes) return false;
  const AlgoFilter& filter = in.filter ? *in.filter : envAlgoFilter();
  const bool ll = filter.allows(in.coll, Protocol::LL);
  const bool bulk = filter.allows(in.coll, Protocol::LL128) || filter.allows(in.coll, Protocol::Simple);
  if (ll != bulk) return ll;
  const CalibrationParams& cal = *in.calibration;
  const CostParams p = costParams(cal, in.transport, in.datatype);
  return p.beta > 0 && double(opBytes) < p.alpha / p.beta;
}

PlanChoice choosePlan(const TuningInput& in) {
  uint8_t implemented = 0;
  for (int a = 0; a < schedule::kNumAlgorithms; ++a)
    if (algorithmSupports(static_cast<schedule::Algorithm>(a), in.coll)) implemented |= 1u << a;
  if (!in.peerAccess || in.wire != reduce::WireType::None)
    implemented &= ~(1u << static_cast<int>(schedule::Algorithm::PeerAccess));
  // Fixed-point steps keep no partial sum in a buffer (the ring streams them).
  if (in.wire == reduce::WireType::Fixed64) implemented &= 1u << static_cast<int>(schedule::Algorithm::Ring);
  if (!logEnabled(LogLevel::Info, kLogTuning)) return choosePlanAmong(in, implemented, nullptr);
  double perAlgorithm[schedule::kNumAlgorithms];
  PlanChoice c = choosePlanAmong(in, implemented, perAlgorithm);
  char line[512];
  formatPlanChoice(in, c, perAlgorithm, line, sizeof(line));
  BRAID_INFO(kLogTuning, "%s", line);
  return c;
}

void formatPlanChoice(const TuningInput& in, const PlanChoice& c, const double* perAlgorithm,
                      char* buf, size_t len) {
  const double n = modelBytes(in.coll, in.count, bytesPerElem(in), in.nranks);
  int used = snprintf(buf, len, "%s %.0f B x %d ranks (%s): %s/%s chunk %zu elems %d ch, predicted %.1f us",
                      collectiveName(in.coll), n, in.nranks, transportClassName(in.transport),
                      algorithmName(c.algorithm), protocolName(c.protocol), c.chunkElems, c.nchannels,
                      c.predictedSeconds * 1e6);
  bool first = true;
  for (int a = 0; perAlgorithm && a < schedule::kNumAlgorithms && used > 0 && static_cast<size_t>(used) < len; ++a) {
    if (a == static_cast<int>(c.algorithm) || !(perAlgorithm[a] < kInf)) continue;
    used += snprintf(buf + used, len - used, "%s%s %.1f us", first ? " (" : ", ",
                     algorithmName(static_cast<schedule::Algorithm>(a)), perAlgorithm[a] * 1e6);
    first = false;
  }
  if (!first && used > 0 && static_cast<size_t>(used) < len) used += snprintf(buf + used, len - used, ")");
  if (c.forced && used > 0 && static_cast<size_t>(used) < len)
    snprintf(buf + used, len - used, " [NCCL_ALGO/NCCL_PROTO]");
}

TransportClass slowestTransportClass(const std::vector<PeerInfo>& peers, bool shmDisabled) {
  bool oneProcess = true, oneHost = true;
  for (const PeerInfo& p : peers) {
    oneProcess = oneProcess && p.processId == peers.front().processId;
    oneHost = oneHost && p.hostHash == peers.front().hostHash && p.shmDomain == peers.front().shmDomain;
  }
  if (oneProcess) return TransportClass::InProcess;
  if (oneHost && !shmDisabled) return TransportClass::SharedMemory;
  return TransportClass::Tcp;
}

}  // namespace braid::tuning
