#include "tests/kernels/exec_harness.h"

#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include "tests/emulation/gpu_scheduler.h"
#include "tests/emulation/thread_block.h"
#include "kernels/executor/host_lane_runner.h"
#include "kernels/executor/lane_binding.h"
#include "reduce/host_reduce.h"
#include "reduce/numeric.h"

namespace exectest {

using braid::schedule::Buffer;
using braid::schedule::Collective;
using braid::schedule::Lane;
using braid::schedule::Plan;
using braid::schedule::Step;
using braid::schedule::StepKind;
namespace executor = braid::executor;

std::string describe(const CollCase& c) {
  std::ostringstream o;
  o << braid::schedule::collectiveName(c.coll) << "/" << braid::schedule::algorithmName(c.algorithm) << " P=" << c.nranks
    << " count=" << c.count << " root=" << c.root << " chunk=" << c.chunkElems << " ch=" << c.nchannels
    << " type=" << braid::reduce::typeName(c.type) << " op=" << int(c.op) << (c.inPlace ? " in-place" : "");
  return o.str();
}

namespace {

size_t inputElems(const CollCase& c, int r) {
  const size_t n = c.count, p = size_t(c.nranks);
  switch (c.coll) {
    case Collective::Broadcast: return r == c.root ? n : 0;
    case Collective::Scatter: return r == c.root ? n * p : 0;
    case Collective::ReduceScatter:
    case Collective::AllToAll: return n * p;
    default: return n;
  }
}

size_t outputElems(const CollCase& c, int r) {
  const size_t n = c.count, p = size_t(c.nranks);
  switch (c.coll) {
    case Collective::Reduce: return r == c.root ? n : 0;
    case Collective::Gather: return r == c.root ? n * p : 0;
    case Collective::AllGather:
    case Collective::AllToAll: return n * p;
    default: return n;
  }
}

braid::schedule::CollShape shapeOf(const CollCase& c, int r) {
  braid::schedule::CollShape s;
  s.coll = c.coll;
  s.algorithm = c.algorithm;
  s.rank = r;
  s.nranks = c.nranks;
  s.count = c.count;
  s.root = c.root;
  s.chunkElems = c.chunkElems;
  s.nchannels = c.nchannels;
  return s;
}

// Floating values: mostly moderate (sums stay meaningful), 1 in 16 arbitrary
// bits (NaN, infinity, subnormals, extremes).
void fillRandom(ncclDataType_t type, uint8_t* p, size_t n, std::mt19937_64& rng) {
  const size_t size = braid::reduce::typeSize(type);
  std::uniform_real_distribution<float> moderate(-4.0f, 4.0f);
  for (size_t i = 0; i < n; ++i) {
    uint64_t bits = rng();
    const bool special = (bits & 15) == 0;
    bits = rng();
    if (braid::reduce::isFloatingType(type) && !special) {
      const float f = moderate(rng);
      switch (type) {
        case ncclFloat16: bits = braid::reduce::toHalf(f).bits; break;
        case ncclBfloat16: bits = braid::reduce::toBFloat16(f).bits; break;
        case ncclFloat8e4m3: bits = braid::reduce::toFp8E4M3(f).bits; break;
        case ncclFloat8e5m2: bits = braid::reduce::toFp8E5M2(f).bits; break;
        case ncclFloat32: std::memcpy(&bits, &f, 4); break;
        default: {
          const double d = double(f) / 3.0;
          std::memcpy(&bits, &d, 8);
        }
      }
    }
    std::memcpy(p + i * size, &bits, size);
  }
}

braid::reduce::RedOp redOpOf(const CollCase& c) { return braid::reduce::makeBuiltinOp(c.op, c.type, c.nranks); }

struct Buffers {
  const char* input = nullptr;
  char* output = nullptr;
  char* scratch = nullptr;
};

Buffers buffersOf(RankData& d, const CollCase& c) {
  Buffers b;
  b.output = d.output.empty() ? nullptr : reinterpret_cast<char*>(d.output.data());
  b.input = c.inPlace ? b.output : (d.input.empty() ? nullptr : reinterpret_cast<const char*>(d.input.data()));
  b.scratch = d.scratch.empty() ? nullptr : reinterpret_cast<char*>(d.scratch.data());
  return b;
}

using FifoKey = std::tuple<int, int, int>;  // from, to, channel

}  // namespace

std::vector<Plan> makePlans(const CollCase& c) {
  std::vector<Plan> plans;
  for (int r = 0; r < c.nranks; ++r) {
    if (c.coll == Collective::Send) {
      // Rank r sends to r+1 and receives from r-1: the two halves of a group.
      braid::schedule::CollShape s = shapeOf(c, r);
      s.root = (r + 1) % c.nranks;
      Plan plan = braid::schedule::generatePlan(s);
      s.coll = Collective::Recv;
      s.root = (r + c.nranks - 1) % c.nranks;
      Plan recv = braid::schedule::generatePlan(s);
      for (Lane& l : recv.lanes) plan.lanes.push_back(std::move(l));
      plan.scratchElems = std::max(plan.scratchElems, recv.scratchElems);
      plans.push_back(std::move(plan));
    } else {
      plans.push_back(braid::schedule::generatePlan(shapeOf(c, r)));
    }
  }
  return plans;
}

std::vector<RankData> makeData(const CollCase& c, const std::vector<Plan>& plans, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t size = braid::reduce::typeSize(c.type);
  std::vector<RankData> data(size_t(c.nranks));
  for (int r = 0; r < c.nranks; ++r) {
    RankData& d = data[size_t(r)];
    const size_t in = inputElems(c, r), out = outputElems(c, r);
    if (c.inPlace) {
      d.output.resize(out * size);
      fillRandom(c.type, d.output.data(), out, rng);
    } else {
      d.input.resize(in * size);
      fillRandom(c.type, d.input.data(), in, rng);
      d.output.assign(out * size, 0xa5);  // not zero: a missed write shows
    }
    d.scratch.assign(plans[size_t(r)].scratchElems * size, 0x5a);
  }
  return data;
}

// ---- the reference: each step's arithmetic over unbounded queues ----

std::string runReference(const CollCase& c, const std::vector<Plan>& plans, std::vector<RankData>* data) {
  const braid::reduce::RedOp op = redOpOf(c);
  const size_t esize = braid::reduce::typeSize(c.type);
  std::map<FifoKey, std::deque<std::vector<char>>> queues;
  std::vector<std::vector<size_t>> next(plans.size());
  for (size_t r = 0; r < plans.size(); ++r) next[r].assign(plans[r].lanes.size(), 0);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < c.nranks; ++r) {
      // Rank k's buffer `ref` (PeerReduce steps address every rank's).
      auto atRank = [&](int k, braid::schedule::BufferRef ref) -> char* {
        const Buffers b = buffersOf((*data)[size_t(k)], c);
        char* base = ref.buffer == Buffer::Input ? const_cast<char*>(b.input)
                     : ref.buffer == Buffer::Output ? b.output
                                                    : b.scratch;
        return base + ref.offset * esize;
      };
      auto at = [&](braid::schedule::BufferRef ref) { return atRank(r, ref); };
      const Plan& plan = plans[size_t(r)];
      for (size_t li = 0; li < plan.lanes.size(); ++li) {
        const Lane& lane = plan.lanes[li];
        size_t& k = next[size_t(r)][li];
        while (k < lane.steps.size()) {
          const Step& s = lane.steps[k];
          const size_t bytes = s.count * esize;
          std::deque<std::vector<char>>* q = nullptr;
          if (braid::schedule::stepReceives(s.kind)) {
            q = &queues[FifoKey(s.recvPeer, r, lane.channel)];
            if (q->empty()) break;
            if (q->front().size() != bytes) return "reference: message size mismatch at rank " + std::to_string(r);
          }
          const char* in = q ? q->front().data() : nullptr;
          std::vector<char> msg(braid::schedule::stepSends(s.kind) ? bytes : 0);
          char* out = msg.data();
          switch (s.kind) {
            case StepKind::Send: braid::reduce::hostCopy(op, out, at(s.src), s.count, s.srcIsContribution, false); break;
            case StepKind::Recv: std::memcpy(at(s.dst), in, bytes); break;
            case StepKind::RecvReduceSend:
              braid::reduce::hostReduce(op, out, in, at(s.src), s.count, s.srcIsContribution, s.final);
              break;
            case StepKind::RecvReduceCopy:
              braid::reduce::hostReduce(op, at(s.dst), in, at(s.src), s.count, s.srcIsContribution, s.final);
              break;
            case StepKind::RecvReduceCopySend:
              braid::reduce::hostReduce(op, at(s.dst), in, at(s.src), s.count, s.srcIsContribution, s.final);
              std::memcpy(out, at(s.dst), bytes);
              break;
            case StepKind::RecvCopySend:
              std::memcpy(out, in, bytes);
              std::memcpy(at(s.dst), in, bytes);
              break;
            case StepKind::Copy:
              if (s.srcIsContribution || s.final || at(s.src) != at(s.dst))
                braid::reduce::hostCopy(op, at(s.dst), at(s.src), s.count, s.srcIsContribution, s.final);
              break;
            case StepKind::PeerReduce: {
              // pre(x0), then each later source combined in rank order, then post.
              std::vector<char> acc(bytes);
              const int nsrc = s.peerSrc ? c.nranks : 1, ndst = s.peerDst ? c.nranks : 1;
              auto src = [&](int k) { return atRank(s.peerSrc ? k : r, s.src); };
              braid::reduce::hostCopy(op, acc.data(), src(0), s.count, s.srcIsContribution, false);
              for (int k = 1; k < nsrc; ++k)
                braid::reduce::hostReduce(op, acc.data(), acc.data(), src(k), s.count, s.srcIsContribution, false);
              for (int k = 0; k < ndst; ++k)
                braid::reduce::hostCopy(op, atRank(s.peerDst ? k : r, s.dst), acc.data(), s.count, false, s.final);
              break;
            }
          }
          if (braid::schedule::stepSends(s.kind)) queues[FifoKey(r, s.sendPeer, lane.channel)].push_back(std::move(msg));
          if (q) q->pop_front();
          ++k;
          progress = true;
        }
      }
    }
  }
  for (size_t r = 0; r < plans.size(); ++r)
    for (size_t li = 0; li < plans[r].lanes.size(); ++li)
      if (next[r][li] != plans[r].lanes[li].steps.size())
        return "reference: rank " + std::to_string(r) + " lane " + std::to_string(li) + " stuck";
  for (const auto& kv : queues)
    if (!kv.second.empty()) return "reference: messages left over";
  return "";
}

// ---- the interpreter, a thread per lane ----

namespace {

struct FifoMemory {
  braid::executor::FifoLayout layout;
  std::vector<uint64_t> words;  // 8-byte aligned backing
  braid::executor::FifoView view() { return braid::executor::fifoViewAt(reinterpret_cast<char*>(words.data()), layout); }
};

struct LaneRun {
  braid::executor::BoundLane bound;
  std::vector<braid::executor::Port> sendPorts, recvPorts;
  std::vector<braid::executor::Port*> sendPtrs, recvPtrs;
  std::vector<uint64_t> recvStage, sendStage;
  braid::executor::OpBuffers op;
  braid::executor::LaneExec exec;
  braid::executor::ExecStatus status = braid::executor::ExecStatus::Ok;
  int rank = 0;
};

// Every lane in turn on this thread until all are done; a lane whose turn
// returns WouldBlock keeps its place. maxRounds rounds in which no lane
// moved count as a hang (the lanes still running end TimedOut).
void runInTurns(std::vector<std::unique_ptr<LaneRun>>& runs, uint64_t maxRounds) {
  std::vector<bool> done(runs.size(), false);
  size_t remaining = runs.size();
  for (uint64_t idle = 0; remaining > 0 && idle < maxRounds;) {
    bool moved = false;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (done[i]) continue;
      bool lane = false;
      runs[i]->status = braid::executor::runLaneTurn(runs[i]->exec, &lane);
      moved = moved || lane;
      if (runs[i]->status != braid::executor::ExecStatus::WouldBlock) {
        done[i] = true;
        --remaining;
      }
    }
    idle = moved ? 0 : idle + 1;
  }
  for (size_t i = 0; i < runs.size(); ++i)
    if (!done[i]) runs[i]->status = braid::executor::ExecStatus::TimedOut;
}

}  // namespace

const std::vector<CollAlgo>& everySchedule() {
  using braid::schedule::Algorithm;
  using ::exectest::Collective;
  static const std::vector<CollAlgo> all = {
      {Collective::AllReduce, Algorithm::Ring},          {Collective::AllReduce, Algorithm::Tree},
      {Collective::AllReduce, Algorithm::RecursiveDoubling}, {Collective::AllReduce, Algorithm::HalvingDoubling},
      {Collective::ReduceScatter, Algorithm::Ring},      {Collective::ReduceScatter, Algorithm::HalvingDoubling},
      {Collective::AllGather, Algorithm::Ring},          {Collective::AllGather, Algorithm::RecursiveDoubling},
      {Collective::Broadcast, Algorithm::Ring},          {Collective::Broadcast, Algorithm::Tree},
      {Collective::Reduce, Algorithm::Ring},             {Collective::Reduce, Algorithm::Tree},
      {Collective::AllToAll, Algorithm::Direct},         {Collective::Gather, Algorithm::Direct},
      {Collective::Scatter, Algorithm::Direct},          {Collective::Send, Algorithm::Direct},
      {Collective::AllReduce, Algorithm::PeerAccess},    {Collective::ReduceScatter, Algorithm::PeerAccess},
      {Collective::AllGather, Algorithm::PeerAccess},
  };
  return all;
}

std::string scheduleName(const CollAlgo& ca) {
  return std::string(braid::schedule::collectiveName(ca.coll)) + braid::schedule::algorithmName(ca.algorithm);
}

std::string runInterpreter(const CollCase& c, const RunConfig& cfg, const std::vector<Plan>& plans,
                           std::vector<RankData>* data, std::vector<braid::executor::ExecStatus>* statuses) {
  const size_t esize = braid::reduce::typeSize(c.type);
  const uint64_t payload = uint64_t(c.chunkElems) * esize;
  std::map<FifoKey, std::unique_ptr<FifoMemory>> fifos;
  auto fifo = [&](int from, int to, int channel) {
    auto& f = fifos[FifoKey(from, to, channel)];
    if (!f) {
      f = std::make_unique<FifoMemory>();
      f->layout = braid::executor::fifoLayout(cfg.protocol, cfg.nslots, payload);
      f->words.resize(f->layout.totalBytes / 8);
      braid::executor::initFifoImage(reinterpret_cast<char*>(f->words.data()), f->layout, cfg.fifoBase);
    }
    return f->view();
  };

  std::vector<std::unique_ptr<LaneRun>> runs;
  uint32_t failure = 0;
  // Every rank's buffers, which PeerReduce steps address (OpBuffers::peers).
  std::vector<braid::executor::OpBuffers> rankOps(size_t(c.nranks));
  std::vector<const braid::executor::OpBuffers*> peerTable;
  for (int r = 0; r < c.nranks; ++r) {
    const Buffers b = buffersOf((*data)[size_t(r)], c);
    braid::executor::OpBuffers& o = rankOps[size_t(r)];
    o.input = b.input;
    o.output = b.output;
    o.scratch = b.scratch;
    o.op = redOpOf(c);
    peerTable.push_back(&o);
  }
  for (braid::executor::OpBuffers& o : rankOps) {
    o.peers = peerTable.data();
    o.npeers = uint32_t(c.nranks);
  }
  for (int r = 0; r < c.nranks; ++r) {
    for (const Lane& lane : plans[size_t(r)].lanes) {
      auto run = std::make_unique<LaneRun>();
      run->rank = r;
      const std::string err = braid::executor::bindLane(lane, cfg.protocol, esize, payload, &run->bound);
      if (!err.empty()) return "rank " + std::to_string(r) + ": " + err;
      for (int32_t peer : run->bound.sendPeers) {
        braid::executor::Port p;
        p.fifo = fifo(r, peer, lane.channel);
        p.seq = p.seen = cfg.fifoBase;
        run->sendPorts.push_back(p);
      }
      for (int32_t peer : run->bound.recvPeers) {
        braid::executor::Port p;
        p.fifo = fifo(peer, r, lane.channel);
        p.seq = p.seen = cfg.fifoBase;
        run->recvPorts.push_back(p);
      }
      const uint64_t stageWords = (payload + 7) / 8;
      run->recvStage.assign(stageWords, 0);
      run->sendStage.assign(stageWords, 0);
      braid::executor::LaneExec& L = run->exec;
      L.steps = run->bound.steps.data();
      L.nsteps = uint32_t(run->bound.steps.size());
      for (braid::executor::Port& p : run->sendPorts) run->sendPtrs.push_back(&p);
      for (braid::executor::Port& p : run->recvPorts) run->recvPtrs.push_back(&p);
      L.sendPorts = run->sendPtrs.data();
      L.nsendPorts = uint32_t(run->sendPtrs.size());
      L.recvPorts = run->recvPtrs.data();
      L.nrecvPorts = uint32_t(run->recvPtrs.size());
      run->op = rankOps[size_t(r)];
      L.ops = &run->op;
      L.nops = 1;
      L.recvStage = reinterpret_cast<uint32_t*>(run->recvStage.data());
      L.sendStage = reinterpret_cast<uint32_t*>(run->sendStage.data());
      L.stageBytes = stageWords * 8;
      L.wait.maxPolls = cfg.maxPolls;
      L.wait.abortFlag = cfg.abortFlag;
      L.wait.resumable = cfg.oneThread && cfg.resumable;
      if (cfg.shareFailure) L.failure = &failure, L.wait.stopFlag = &failure;
      if (int(runs.size()) == cfg.failLane && !run->bound.steps.empty())
        run->bound.steps.front().recvPort = run->bound.steps.front().sendPort = 1000;
      runs.push_back(std::move(run));
    }
  }

  if (cfg.oneThread) {
    runInTurns(runs, cfg.maxPolls);
  } else if (!cfg.launches.empty()) {
    // Lanes in dispatch order: launch by launch, rank by rank.
    std::vector<LaneRun*> order;
    for (const std::vector<int>& launch : cfg.launches)
      for (int rank : launch)
        for (auto& run : runs)
          if (run->rank == rank) order.push_back(run.get());
    emulation::GpuScheduler gpu(cfg.residentSlots);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < order.size(); ++i) {
      LaneRun* lr = order[i];
      threads.emplace_back([lr, &gpu, i] {
        gpu.dispatch(i);
        lr->status = braid::executor::runLaneOnHost(lr->exec);
        gpu.retire();
      });
    }
    for (std::thread& t : threads) t.join();
  } else if (cfg.threadsPerLane <= 1) {
    std::vector<std::thread> threads;
    threads.reserve(runs.size());
    for (auto& run : runs) {
      LaneRun* lr = run.get();
      threads.emplace_back([lr] { lr->status = braid::executor::runLaneOnHost(lr->exec); });
    }
    for (std::thread& t : threads) t.join();
  } else {
    // Every lane an emulated block, all resident at once (as one launch's
    // blocks must be): each thread runs the lane's code with its own tid.
    std::vector<std::unique_ptr<emulation::BlockShared>> blocks;
    std::vector<std::thread> threads;
    for (auto& run : runs) {
      blocks.push_back(std::make_unique<emulation::BlockShared>(cfg.threadsPerLane, !cfg.brokenBarriers));
      emulation::BlockShared* block = blocks.back().get();
      LaneRun* lr = run.get();
      for (uint32_t t = 0; t < cfg.threadsPerLane; ++t)
        threads.emplace_back([lr, block, t] {
          const braid::executor::ExecStatus st = braid::executor::runMixedLane(emulation::ThreadBlockGroup(block, t), lr->exec);
          if (t == 0) lr->status = st;
        });
    }
    for (std::thread& t : threads) t.join();
  }
  if (cfg.failureWord) *cfg.failureWord = failure;

  std::string err;
  if (statuses) statuses->clear();
  for (auto& run : runs) {
    if (statuses) statuses->push_back(run->status);
    if (run->status != braid::executor::ExecStatus::Ok)
      err += "rank " + std::to_string(run->rank) + " channel " + std::to_string(run->bound.channel) + ": " +
             braid::executor::execStatusName(run->status) + " at step " + std::to_string(run->exec.failedStep) + "; ";
  }
  return err;
}

namespace {

// Whether `bits` (an element of `type`) is a NaN. IEEE 754 leaves the payload
// of an operation's NaN result open: x86 keeps an operand's, a GPU returns its
// canonical NaN (0x7fffffff for float32), so any NaN matches any NaN.
bool isNaN(ncclDataType_t type, uint64_t bits) {
  switch (type) {
    case ncclFloat16: return (bits & 0x7c00) == 0x7c00 && (bits & 0x03ff) != 0;
    case ncclBfloat16: return (bits & 0x7f80) == 0x7f80 && (bits & 0x007f) != 0;
    case ncclFloat32: return (bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu) != 0;
    case ncclFloat64:
      return (bits & 0x7ff0000000000000ull) == 0x7ff0000000000000ull && (bits & 0x000fffffffffffffull) != 0;
    case ncclFloat8e4m3: return (bits & 0x7f) == 0x7f;
    case ncclFloat8e5m2: return (bits & 0x7c) == 0x7c && (bits & 0x03) != 0;
    default: return false;
  }
}

}  // namespace

std::string compareOutputs(const CollCase& c, const std::vector<RankData>& want, const std::vector<RankData>& got) {
  const size_t esize = braid::reduce::typeSize(c.type);
  std::ostringstream o;
  int reported = 0;
  for (size_t r = 0; r < want.size() && reported < 4; ++r) {
    const auto& w = want[r].output;
    const auto& g = got[r].output;
    if (w.size() != g.size()) {
      o << "rank " << r << ": output sizes differ; ";
      ++reported;
      continue;
    }
    for (size_t i = 0; i < w.size() && reported < 4; i += esize) {
      if (std::memcmp(w.data() + i, g.data() + i, esize) == 0) continue;
      uint64_t wb = 0, gb = 0;
      std::memcpy(&wb, w.data() + i, esize);
      std::memcpy(&gb, g.data() + i, esize);
      if (isNaN(c.type, wb) && isNaN(c.type, gb)) continue;
      o << "rank " << r << " element " << i / esize << ": want bits 0x" << std::hex << wb << " got 0x" << gb
        << std::dec << "; ";
      ++reported;
    }
  }
  return o.str();
}

std::string runAndCompare(const CollCase& c, const RunConfig& cfg, uint64_t seed) {
  const std::vector<Plan> plans = makePlans(c);
  std::vector<RankData> want = makeData(c, plans, seed);
  std::vector<RankData> got = want;
  std::string err = runReference(c, plans, &want);
  if (!err.empty()) return describe(c) + ": " + err;
  err = runInterpreter(c, cfg, plans, &got);
  if (!err.empty()) return describe(c) + ": interpreter: " + err;
  err = compareOutputs(c, want, got);
  if (!err.empty()) return describe(c) + (cfg.protocol == braid::executor::Protocol::LL ? " LL" : " bulk") +
                            " nslots=" + std::to_string(cfg.nslots) + ": " + err;
  return "";
}

}  // namespace exectest
