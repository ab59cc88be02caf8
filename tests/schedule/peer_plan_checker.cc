// The plan checker for plans whose steps address the peers' buffers in place
// (PeerReduce, the PeerAccess algorithm). Such steps exchange no message, so
// nothing orders the lanes of different ranks (or of one rank): every rank's
// lanes may run in any interleaving. The check therefore runs each lane's
// steps in order, lane after lane, over every rank's buffers, and fails when
// two lanes touch one element of any rank's memory where either writes it (a
// race, whatever order they ran in), besides the value checks of the FIFO
// checker: every output holds exactly the contributions it must, the final
// operation once on complete sums, no read of an unwritten element, buffer
// ranges, in-place aliasing as NCCL defines it.
#include <cstdint>
#include <string>
#include <vector>

#include "plan_checker.h"

namespace braid {

namespace {

using schedule::Buffer;
using schedule::Collective;

struct Cell {
  bool init = false;
  bool raw = false;    // the rank's own input, untouched
  bool final = false;  // the final operation was applied
  uint32_t index = 0;  // which element of the inputs it is
  uint64_t ranks = 0;  // whose contributions it holds
  int64_t writer = -1;  // the lane that wrote it (-1: none)
  int64_t reader = -1;  // the lane that read it (-1 none, -2 several)
};

struct RankMemory {
  std::vector<Cell> user;  // input and output, one array when in place
  size_t inBase = 0, outBase = 0, inSize = 0, outSize = 0;
};

class PeerSim {
 public:
  PeerSim(const schedule::CollShape& s, const CheckOptions& o) : s_(s), opts_(o) {}

  std::string run(CheckStats* stats) {
    if (s_.nranks < 1 || s_.nranks > 64) return "the peer-access check takes 1..64 ranks";
    if (s_.coll != Collective::AllReduce && s_.coll != Collective::ReduceScatter && s_.coll != Collective::AllGather)
      return std::string("no peer-access check for ") + collectiveName(s_.coll);
    full_ = s_.nranks == 64 ? ~uint64_t(0) : (uint64_t(1) << s_.nranks) - 1;
    for (int r = 0; r < s_.nranks; ++r) mem_.push_back(buffersOf(r));
    CheckStats st;
    int64_t laneId = 0;
    for (int r = 0; r < s_.nranks; ++r) {
      schedule::CollShape at = s_;
      at.rank = r;
      schedule::Plan plan = generatePlan(at);
      if (opts_.mutate) opts_.mutate(r, &plan);
      size_t steps = 0;
      for (const schedule::Lane& lane : plan.lanes) {
        for (size_t i = 0; i < lane.steps.size(); ++i) {
          const std::string why = step(r, laneId, lane.steps[i]);
          if (!why.empty()) return "rank " + std::to_string(r) + " lane " + std::to_string(lane.key.index) +
                                   " step " + std::to_string(i) + ": " + why;
        }
        steps += lane.steps.size();
        ++laneId;
      }
      st.steps += steps;
      st.maxStepsPerRank = std::max(st.maxStepsPerRank, steps);
      st.maxLanesPerRank = std::max(st.maxLanesPerRank, plan.lanes.size());
    }
    const std::string wrong = verify();
    if (wrong.empty() && stats) *stats = st;
    return wrong;
  }

 private:
  RankMemory buffersOf(int r) const {
    const size_t n = s_.count, p = size_t(s_.nranks);
    RankMemory m;
    m.inSize = s_.coll == Collective::ReduceScatter ? n * p : n;
    m.outSize = s_.coll == Collective::AllGather ? n * p : n;
    if (opts_.inPlace) {
      m.user.resize(std::max(m.inSize, m.outSize));
      if (s_.coll == Collective::AllGather) m.inBase = size_t(r) * n;
      if (s_.coll == Collective::ReduceScatter) m.outBase = size_t(r) * n;
    } else {
      m.user.resize(m.inSize + m.outSize);
      m.outBase = m.inSize;
    }
    for (size_t i = 0; i < m.inSize; ++i) {
      Cell& c = m.user[m.inBase + i];
      c.init = c.raw = true;
      c.index = uint32_t(i);
      c.ranks = uint64_t(1) << r;
    }
    return m;
  }

  // Rank k's cell `offset` of `b`, or null when out of range.
  Cell* cell(int k, Buffer b, size_t offset) {
    RankMemory& m = mem_[size_t(k)];
    if (b == Buffer::Input) return offset < m.inSize ? &m.user[m.inBase + offset] : nullptr;
    if (b == Buffer::Output) return offset < m.outSize ? &m.user[m.outBase + offset] : nullptr;
    return nullptr;
  }

  static std::string race(int k, Buffer b, size_t offset) {
    return std::string("races another lane on rank ") + std::to_string(k) + "'s " +
           (b == Buffer::Input ? "input" : "output") + "[" + std::to_string(offset) + "]";
  }

  std::string step(int r, int64_t lane, const schedule::Step& st) {
    if (st.kind != schedule::StepKind::PeerReduce)
      return std::string("a ") + stepKindName(st.kind) + " step in a peer-access plan";
    if (st.src.buffer == Buffer::Scratch || st.dst.buffer == Buffer::Scratch) return "scratch in a peer-access step";
    const bool reduction = isReduction(s_.coll);
    const int nsrc = st.peerSrc ? s_.nranks : 1, ndst = st.peerDst ? s_.nranks : 1;
    for (size_t i = 0; i < st.count; ++i) {
      Cell v;
      for (int j = 0; j < nsrc; ++j) {
        const int k = st.peerSrc ? j : r;
        Cell* c = cell(k, st.src.buffer, st.src.offset + i);
        if (!c) return "reads past rank " + std::to_string(k) + "'s buffer";
        if (c->writer >= 0 && c->writer != lane) return race(k, st.src.buffer, st.src.offset + i);
        c->reader = c->reader == -1 || c->reader == lane ? lane : -2;
        if (!c->init) return "reads rank " + std::to_string(k) + "'s element before anything wrote it";
        if (reduction && c->raw != st.srcIsContribution)
          return c->raw ? "reads a raw input without the contribution flag" : "flags a partial result as a contribution";
        if (j > 0 && c->index != v.index) return "reduces different elements together";
        if ((v.ranks & c->ranks) != 0) return "counts a rank's contribution twice";
        if (c->final && nsrc > 1) return "reduces a finished value";
        v.index = c->index;
        v.ranks |= c->ranks;
        v.final = c->final;
      }
      if (st.final) {
        if (v.final) return "applies the final operation twice";
        if (v.ranks != full_) return "applies the final operation to an incomplete sum";
        v.final = true;
      }
      v.init = true;
      for (int j = 0; j < ndst; ++j) {
        const int k = st.peerDst ? j : r;
        Cell* c = cell(k, st.dst.buffer, st.dst.offset + i);
        if (!c) return "writes past rank " + std::to_string(k) + "'s buffer";
        if ((c->writer >= 0 && c->writer != lane) || (c->reader != -1 && c->reader != lane))
          return race(k, st.dst.buffer, st.dst.offset + i);
        const int64_t reader = c->reader;
        *c = v;
        c->writer = lane;
        c->reader = reader;
      }
    }
    return "";
  }

  std::string verify() const {
    const size_t n = s_.count;
    for (int r = 0; r < s_.nranks; ++r) {
      const RankMemory& m = mem_[size_t(r)];
      for (size_t i = 0; i < m.outSize; ++i) {
        const Cell& c = m.user[m.outBase + i];
        uint32_t index = uint32_t(i);
        uint64_t ranks = full_;
        if (s_.coll == Collective::ReduceScatter) index = uint32_t(size_t(r) * n + i);
        if (s_.coll == Collective::AllGather) index = uint32_t(i % n), ranks = uint64_t(1) << (i / n);
        const std::string where = "rank " + std::to_string(r) + " output[" + std::to_string(i) + "] ";
        if (!c.init) return where + "was never written";
        if (c.index != index || c.ranks != ranks) return where + "holds the wrong element or contributions";
        if (isReduction(s_.coll) && !c.final) return where + "was written without the final operation";
      }
    }
    return "";
  }

  schedule::CollShape s_;
  CheckOptions opts_;
  uint64_t full_ = 0;
  std::vector<RankMemory> mem_;
};

}  // namespace

std::string checkPeerAccessPlans(const schedule::CollShape& shape, const CheckOptions& opts, CheckStats* stats) {
  return PeerSim(shape, opts).run(stats);
}

}  // namespace braid
