#include "plan_checker.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <sstream>
#include <vector>

namespace braid {
namespace {

// One contribution: element `index` of rank `rank`'s input.
using Contribution = std::pair<int32_t, uint32_t>;
struct Value {
  std::vector<Contribution> parts;
  bool final = false;  // written by a step that applies the final operation
};

struct RankState {
  Plan plan;
  std::vector<Value> input, output;
  std::vector<size_t> next;  // per lane
};

struct Message {
  std::vector<Value> values;
};

struct Sim {
  CollShape base;
  int nslots = 2;
  std::function<void(int, Plan*)> mutate;
  std::vector<RankState> ranks;
  // FIFO per (from, to, channel).
  std::map<std::tuple<int, int, int>, std::deque<Message>> fifos;
  std::string error;

  size_t inputSize() const { return sizeFor(true); }
  size_t outputSize() const { return sizeFor(false); }
  size_t sizeFor(bool input) const {
    const size_t n = base.count, p = base.nranks;
    switch (base.coll) {
      case Collective::ReduceScatter: return input ? n * p : n;
      case Collective::AllGather: return input ? n : n * p;
      case Collective::AllToAll: return n * p;
      case Collective::Gather: return input ? n : n * p;
      case Collective::Scatter: return input ? n * p : n;
      default: return n;
    }
  }

  bool fail(const std::string& what) {
    if (error.empty()) error = what;
    return false;
  }

  std::vector<Value>& buf(RankState& rs, BufferRef ref) {
    return ref.buffer == Buffer::Input ? rs.input : rs.output;
  }

  bool inRange(RankState& rs, BufferRef ref, size_t count, int rank, const char* what) {
    if (ref.offset + count <= buf(rs, ref).size()) return true;
    std::ostringstream os;
    os << "rank " << rank << ": " << what << " range " << ref.offset << "+" << count
       << " is outside its buffer of " << buf(rs, ref).size();
    return fail(os.str());
  }

  static Value combine(const Value& received, const Value& local) {
    Value v;
    v.parts = received.parts;
    v.parts.insert(v.parts.end(), local.parts.begin(), local.parts.end());
    return v;
  }

  // Runs the step if its inputs and FIFO space are there.
  bool tryStep(int r, const Lane& lane, const Step& s, bool* ran) {
    *ran = false;
    RankState& rs = ranks[r];
    const bool reduction = isReduction(base.coll);
    std::deque<Message>* in = nullptr;
    std::deque<Message>* out = nullptr;
    if (stepReceives(s.kind)) {
      in = &fifos[{s.recvPeer, r, lane.channel}];
      if (in->empty()) return true;
      if (in->front().values.size() != s.count) {
        std::ostringstream os;
        os << "rank " << r << " expects " << s.count << " elements from rank " << s.recvPeer
           << " but the message holds " << in->front().values.size();
        return fail(os.str());
      }
    }
    if (stepSends(s.kind)) {
      if (s.sendPeer < 0 || s.sendPeer >= base.nranks) return fail("send to a rank out of range");
      out = &fifos[{r, s.sendPeer, lane.channel}];
      if (static_cast<int>(out->size()) >= nslots) return true;
    }
    if (stepReceives(s.kind) && (s.recvPeer < 0 || s.recvPeer >= base.nranks))
      return fail("receive from a rank out of range");
    if (stepReadsSrc(s.kind) && !inRange(rs, s.src, s.count, r, "source")) return false;
    if (stepWritesDst(s.kind) && !inRange(rs, s.dst, s.count, r, "destination")) return false;
    if (reduction && stepReadsSrc(s.kind) && s.srcIsContribution != (s.src.buffer == Buffer::Input))
      return fail("rank " + std::to_string(r) + ": contribution flag disagrees with the source buffer");

    std::vector<Value> result(s.count);
    for (size_t i = 0; i < s.count; ++i) {
      const Value* local = stepReadsSrc(s.kind) ? &buf(rs, s.src)[s.src.offset + i] : nullptr;
      const Value* recv = in ? &in->front().values[i] : nullptr;
      if (recv && local) result[i] = combine(*recv, *local);
      else result[i] = recv ? *recv : *local;
      const bool alreadyFinal = (recv && recv->final) || (local && local->final);
      if (s.final && alreadyFinal)
        return fail("rank " + std::to_string(r) + " applies the final operation twice");
      result[i].final = s.final || (!(recv && local) && alreadyFinal);
    }
    if (in) in->pop_front();
    if (stepWritesDst(s.kind))
      for (size_t i = 0; i < s.count; ++i) buf(rs, s.dst)[s.dst.offset + i] = result[i];
    if (out) out->push_back(Message{std::move(result)});
    *ran = true;
    return true;
  }

  bool run() {
    for (int r = 0; r < base.nranks; ++r) {
      CollShape s = base;
      s.rank = r;
      RankState& rs = ranks[r];
      rs.plan = generatePlan(s);
      if (mutate) mutate(r, &rs.plan);
      rs.next.assign(rs.plan.lanes.size(), 0);
      rs.input.resize(inputSize());
      for (size_t i = 0; i < rs.input.size(); ++i) rs.input[i].parts = {{r, static_cast<uint32_t>(i)}};
      rs.output.resize(outputSize());
    }
    for (;;) {
      bool progressed = false, pending = false;
      for (int r = 0; r < base.nranks; ++r) {
        RankState& rs = ranks[r];
        for (size_t l = 0; l < rs.plan.lanes.size(); ++l) {
          const Lane& lane = rs.plan.lanes[l];
          while (rs.next[l] < lane.steps.size()) {
            bool ran = false;
            if (!tryStep(r, lane, lane.steps[rs.next[l]], &ran)) return false;
            if (!ran) break;
            ++rs.next[l];
            progressed = true;
          }
          if (rs.next[l] < lane.steps.size()) pending = true;
        }
      }
      if (!pending) break;
      if (!progressed) return fail("deadlock: " + describeStuck());
    }
    for (auto& [key, q] : fifos)
      if (!q.empty())
        return fail("rank " + std::to_string(std::get<0>(key)) + " sent a message to rank " +
                    std::to_string(std::get<1>(key)) + " that was never received");
    return verify();
  }

  std::string describeStuck() {
    std::ostringstream os;
    for (int r = 0; r < base.nranks; ++r)
      for (size_t l = 0; l < ranks[r].plan.lanes.size(); ++l)
        if (ranks[r].next[l] < ranks[r].plan.lanes[l].steps.size()) {
          const Step& s = ranks[r].plan.lanes[l].steps[ranks[r].next[l]];
          os << "rank " << r << " lane " << l << " at " << stepKindName(s.kind) << "; ";
        }
    return os.str();
  }

  // What output element `i` of rank `r` must hold; empty when it is not written.
  std::vector<Contribution> expected(int r, size_t i) const {
    const int p = base.nranks, root = base.root;
    const size_t n = base.count;
    std::vector<Contribution> all;
    auto everyone = [&](size_t index) {
      for (int q = 0; q < p; ++q) all.push_back({q, static_cast<uint32_t>(index)});
    };
    switch (base.coll) {
      case Collective::AllReduce: everyone(i); break;
      case Collective::ReduceScatter: everyone(r * n + i); break;
      case Collective::Reduce: if (r == root) everyone(i); break;
      case Collective::AllGather: all.push_back({static_cast<int>(i / n), static_cast<uint32_t>(i % n)}); break;
      case Collective::Broadcast: all.push_back({root, static_cast<uint32_t>(i)}); break;
      case Collective::AllToAll:
        all.push_back({static_cast<int>(i / n), static_cast<uint32_t>(r * n + i % n)});
        break;
      case Collective::Gather:
        if (r == root) all.push_back({static_cast<int>(i / n), static_cast<uint32_t>(i % n)});
        break;
      case Collective::Scatter: all.push_back({root, static_cast<uint32_t>(r * n + i)}); break;
      default: break;
    }
    return all;
  }

  bool verify() {
    for (int r = 0; r < base.nranks; ++r) {
      for (size_t i = 0; i < ranks[r].output.size(); ++i) {
        std::vector<Contribution> want = expected(r, i), got = ranks[r].output[i].parts;
        std::sort(want.begin(), want.end());
        std::sort(got.begin(), got.end());
        if (want != got) {
          std::ostringstream os;
          os << "rank " << r << " output[" << i << "] holds " << got.size() << " contributions, expected "
             << want.size();
          for (size_t k = 0; k + 1 < got.size(); ++k)
            if (got[k] == got[k + 1]) os << " (rank " << got[k].first << " counted twice)";
          return fail(os.str());
        }
        if (isReduction(base.coll) && !want.empty() && !ranks[r].output[i].final)
          return fail("rank " + std::to_string(r) + " output[" + std::to_string(i) +
                      "] was written without the final operation");
      }
    }
    return true;
  }
};

}  // namespace

std::string checkCollective(const CollShape& shape, const CheckOptions& opts) {
  Sim sim;
  sim.base = shape;
  sim.nslots = opts.nslots;
  sim.mutate = opts.mutate;
  sim.ranks.resize(shape.nranks);
  if (!sim.run()) {
    std::ostringstream os;
    os << collectiveName(shape.coll) << " nranks=" << shape.nranks << " count=" << shape.count
       << " root=" << shape.root << " chunk=" << shape.chunkElems << " channels=" << shape.nchannels
       << ": " << sim.error;
    return os.str();
  }
  return "";
}

}  // namespace braid
