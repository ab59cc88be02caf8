#include "runtime/lanes/lane_executor.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "core/comm.h"
#include "core/connect.h"
#include "core/diagnosis_signal.h"
#include "kernels/executor/host_lane_runner.h"
#include "runtime/lanes/comm_program.h"
#include "runtime/lanes/lane_image.h"
#include "runtime/lanes/lane_program.h"
#include "runtime/lanes/port_table.h"
#include "transports/common/process_liveness.h"

namespace braid {

namespace {

// One communicator's part of the group.
struct CommRun {
  ncclComm* comm = nullptr;
  std::vector<const Task*> tasks;
  lanes::LaneProgram program;
  std::vector<exec::OpBuffers> ops;
  std::vector<uint64_t> image;  // the lanes (lane_image.h), run in place
};

// One lane's thread.
struct LaneRun {
  CommRun* owner = nullptr;
  const lanes::ProgramLane* lane = nullptr;
  exec::LaneExec* exec = nullptr;  // in owner->image
  exec::ExecStatus status = exec::ExecStatus::Ok;
  std::atomic<bool> done{false};
};

// Plans the communicator's calls and merges them into lanes.
Result prepare(CommRun& run) {
  ncclComm* comm = run.comm;
  lanes::CommProgram cp;
  BRAID_TRY(lanes::commProgramOf(run.tasks, &cp));
  if (comm->scratch.size() < cp.scratchBytes) comm->scratch.resize(cp.scratchBytes);
  for (size_t i = 0; i < run.tasks.size(); ++i) {
    const Task& t = *run.tasks[i];
    run.ops.push_back({static_cast<const char*>(t.sendbuff), static_cast<char*>(t.recvbuff),
                       comm->scratch.data() + cp.scratchOffsets[i], t.op});
  }
  run.program = std::move(cp.program);
  if (!comm->lanePorts) comm->lanePorts = std::make_unique<lanes::PortTable>(lanes::makeHostLaneMemory());
  return Result::success();
}

// Lays the communicator's lanes out in host memory, to run in place.
Result buildImage(CommRun& c, const uint32_t* abortWord) {
  const lanes::PortTable& ports = *c.comm->lanePorts;
  const uint64_t stage = lanes::llStageBytesOf(c.comm);
  lanes::ImagePart part;
  part.program = &c.program;
  part.ops = c.ops;
  part.portOf = [&ports](const lanes::PortKey& k) { return ports.port(k); };
  part.abortWord = abortWord;
  const std::vector<lanes::ImagePart> parts = {part};
  c.image.assign((lanes::laneImageBytes(parts, stage) + 7) / 8, 0);
  return lanes::writeLaneImage(parts, stage, reinterpret_cast<uintptr_t>(c.image.data()), c.image.data());
}

// The peer a lane's step waits for (receive first), or -1.
int peerOfStep(const LaneRun& run, uint32_t step) {
  if (step >= run.lane->bound.steps.size()) return -1;
  const exec::ExecStep& s = run.lane->bound.steps[step];
  if (s.recvPort >= 0) return run.lane->bound.recvPeers[size_t(s.recvPort)];
  if (s.sendPort >= 0) return run.lane->bound.sendPeers[size_t(s.sendPort)];
  return -1;
}

std::string describeLane(const LaneRun& run) {
  const uint32_t i = run.exec->failedStep;
  std::string d = "lane on channel " + std::to_string(run.lane->bound.channel) + ", step " + std::to_string(i + 1) +
                  " of " + std::to_string(run.lane->bound.steps.size());
  if (i < run.lane->bound.steps.size()) {
    const exec::ExecStep& s = run.lane->bound.steps[i];
    d += std::string(" (") + stepKindName(s.kind) + ", " + collectiveName(run.owner->tasks[s.op]->coll) + ")";
    const int peer = peerOfStep(run, i);
    if (peer >= 0) d += " with rank " + std::to_string(peer);
  }
  return d;
}

// SIGUSR1 / timeout: one "braid diagnosis:" line per lane still running, as
// the host executor prints (runtime/host/diagnosis.h).
std::string describeWaits(const std::vector<std::unique_ptr<LaneRun>>& runs) {
  std::string out;
  for (const auto& run : runs) {
    if (run->done.load()) continue;
    const ncclComm* comm = run->owner->comm;
    const PeerInfo& self = comm->peers[size_t(comm->rank)];
    const uint64_t at = __atomic_load_n(&run->exec->currentStep, __ATOMIC_RELAXED);
    if (at >= run->lane->bound.steps.size()) continue;
    const exec::ExecStep& s = run->lane->bound.steps[at];
    const Task& t = *run->owner->tasks[s.op];
    char line[400];
    snprintf(line, sizeof line,
             "braid diagnosis: rank %d of %d (pid %d on host %.64s): op #%llu %s(count=%zu, %s): lane on "
             "channel %d step %llu of %zu (%s, %llu elements) waits %s rank %d (lane executor)\n",
             comm->rank, comm->nranks, self.pid, self.hostname, static_cast<unsigned long long>(t.sequence),
             collectiveName(t.coll), t.count, typeName(t.type), run->lane->bound.channel,
             static_cast<unsigned long long>(at + 1), run->lane->bound.steps.size(), stepKindName(s.kind),
             static_cast<unsigned long long>(s.count), s.recvPort >= 0 ? "for data from" : "to send to",
             peerOfStep(*run, uint32_t(at)));
    out += line;
  }
  if (out.empty()) out = "braid diagnosis: every lane is done (lane executor)\n";
  return out;
}

// Whether the lane is stuck on `peer`: waiting to receive a message from it
// that is not (wholly) in the FIFO, or to send to it with no free slot. A
// lost peer's messages already in shared memory stay readable, so a rank that
// has them finishes instead of failing. The lane publishes what it waits for
// in one word (waitingOn), so a lane that just got its message is never
// judged by the next one.
bool waitsOn(const LaneRun& run, int peer) {
  const uint64_t w = exec::loadRelaxed(&run.exec->waitingOn);
  if ((w >> 63) == 0) return false;
  const bool send = ((w >> 62) & 1) != 0;
  const uint32_t port = uint32_t((w >> 48) & 0x3fff);
  const uint64_t m = w & exec::kWaitMessageMask;
  // 48-bit differences: counters may start anywhere.
  auto reached = [m](uint64_t counter, uint64_t ahead) {
    return int64_t(((counter + ahead - m) & exec::kWaitMessageMask) << 16) >= 0;
  };
  const auto& bound = run.lane->bound;
  if (send) {
    if (port >= bound.sendPeers.size() || bound.sendPeers[port] != peer) return false;
    const exec::Port& p = *run.exec->sendPorts[port];
    return !reached(exec::loadAcquire(p.fifo.tail), p.fifo.nslots);
  }
  if (port >= bound.recvPeers.size() || bound.recvPeers[port] != peer) return false;
  const exec::Port& p = *run.exec->recvPorts[port];
  if (p.fifo.protocol != exec::Protocol::LL) return !reached(exec::loadAcquire(p.fifo.head), 0);
  // An LL message has arrived once its lines carry its flag; the first line
  // says whether it started (a peer that died in the middle of one is left to
  // the timeout: the message's size is not known here).
  const uint64_t* line = reinterpret_cast<const uint64_t*>(p.fifo.slot(m));
  return exec::llFlag(exec::loadRelaxed(line)) != uint32_t(m);
}

// Watches a running group from the calling thread: abort, the timeout, a
// lost peer that a lane waits on, and failure notices stop every lane through
// the abort word.
class LaneWatch {
 public:
  LaneWatch(const std::vector<std::unique_ptr<CommRun>>& comms, const std::vector<std::unique_ptr<LaneRun>>& runs)
      : comms_(comms), runs_(runs) {
    deadline_ = Clock::time_point::max();
    for (const auto& c : comms_) deadline_ = std::min(deadline_, deadlineFromNow(c->comm));
  }

  // Success while the group may go on.
  Result check() {
    for (const auto& c : comms_)
      if (c->comm->abortFlag) return fail(ncclSystemError, "rank %d: communicator aborted", c->comm->rank);
    const Clock::time_point now = Clock::now();
    if (now > deadline_) {
      // Printed whatever NCCL_DEBUG says: a hang is what the user needs to see.
      fprintf(stderr, "%s", describeWaits(runs_).c_str());
      return fail(ncclSystemError, "timed out (BRAID_TIMEOUT)");
    }
    if (diagnosisRequests() != diagnosisSeen_) {
      diagnosisSeen_ = diagnosisRequests();
      fprintf(stderr, "%s", describeWaits(runs_).c_str());
    }
    if (now < nextPeerCheck_) return Result::success();
    nextPeerCheck_ = now + std::chrono::milliseconds(100);
    for (const auto& c : comms_) {
      ncclComm* comm = c->comm;
      std::string notice;
      if (comm->bootstrap && comm->bootstrap->pollFailure(&notice)) return failureNoticeError(comm->rank, notice);
      BRAID_TRY(comm->lanePorts->bridgeError());
      for (const auto& [peer, why] : comm->lanePorts->closedBridges())
        if (waitedOn(comm, peer)) return why;
      const PeerInfo& self = comm->peers[size_t(comm->rank)];
      for (const PeerInfo& peer : comm->peers)
        if (peer.processId != self.processId && peerProcessGone(self, peer) && waitedOn(comm, peer.rank))
          return checkPeerProcess(self, peer, "running a lane");
    }
    return Result::success();
  }

 private:
  bool waitedOn(const ncclComm* comm, int peer) const {
    for (const auto& run : runs_)
      if (run->owner->comm == comm && waitsOn(*run, peer)) return true;
    return false;
  }

  const std::vector<std::unique_ptr<CommRun>>& comms_;
  const std::vector<std::unique_ptr<LaneRun>>& runs_;
  Clock::time_point deadline_;
  Clock::time_point nextPeerCheck_ = Clock::time_point::min();
  uint64_t diagnosisSeen_ = diagnosisRequests();
};

Result outcome(const std::vector<std::unique_ptr<LaneRun>>& runs, const Result& stopped) {
  for (const auto& run : runs) {
    if (run->status == exec::ExecStatus::Ok) continue;
    const std::string where = "rank " + std::to_string(run->owner->comm->rank) + ", " + describeLane(*run);
    if (run->status == exec::ExecStatus::Aborted && !stopped.ok())
      return Result(stopped.code(), stopped.message() + " (" + where + ")");
    if (run->status != exec::ExecStatus::Aborted)
      return fail(ncclInternalError, "lane executor: %s: %s", where.c_str(), exec::execStatusName(run->status));
  }
  return stopped;
}

// Same-host FIFOs (offer, then accept, for every communicator), then the
// connections and FIFOs of ranks on other hosts.
Result connect(std::vector<std::unique_ptr<CommRun>>& comms) {
  for (auto& c : comms)
    BRAID_TRY(c->comm->lanePorts->offer(c->comm, lanes::portsOf(c->program), lanes::limitsOf(c->comm)));
  for (auto& c : comms)
    BRAID_TRY(c->comm->lanePorts->accept(c->comm, lanes::portsOf(c->program), lanes::limitsOf(c->comm)));
  std::vector<ConnectionNeed> needs;
  for (auto& c : comms) {
    const auto more = c->comm->lanePorts->bridgeNeeds(c->comm, lanes::portsOf(c->program));
    needs.insert(needs.end(), more.begin(), more.end());
  }
  if (!needs.empty()) BRAID_TRY(connectAll(needs));
  for (auto& c : comms)
    BRAID_TRY(c->comm->lanePorts->attachBridged(c->comm, lanes::portsOf(c->program), lanes::limitsOf(c->comm)));
  return Result::success();
}

Result runLanes(std::vector<std::unique_ptr<CommRun>>& comms) {
  uint32_t abortWord = 0;
  std::vector<std::unique_ptr<LaneRun>> runs;
  for (auto& c : comms) {
    BRAID_TRY(buildImage(*c, &abortWord));
    exec::LaneExec* lanes = reinterpret_cast<exec::LaneExec*>(c->image.data());
    for (size_t i = 0; i < c->program.lanes.size(); ++i) {
      auto run = std::make_unique<LaneRun>();
      run->owner = c.get();
      run->lane = &c->program.lanes[i];
      run->exec = &lanes[i];
      runs.push_back(std::move(run));
    }
  }
  std::mutex mu;
  std::condition_variable cv;
  size_t running = runs.size();
  std::vector<std::thread> threads;
  Result stopped;
  for (auto& run : runs) {
    LaneRun* r = run.get();
    try {
      threads.emplace_back([&, r] {
        r->status = exec::runLaneOnHost(*r->exec);
        if (r->status != exec::ExecStatus::Ok) __atomic_store_n(&abortWord, 1u, __ATOMIC_RELAXED);
        r->done.store(true);
        std::lock_guard<std::mutex> lock(mu);
        if (--running == 0) cv.notify_all();
      });
    } catch (const std::system_error& e) {
      // The lanes that started stop at the abort word; their peers hear of
      // this rank's failure or time out.
      stopped = fail(ncclSystemError, "rank %d: could not start lane thread %zu of %zu: %s (too many lanes for "
                     "this process; BRAID_EXECUTOR=lanes runs one thread per lane)", r->owner->comm->rank,
                     threads.size() + 1, runs.size(), e.what());
      __atomic_store_n(&abortWord, 1u, __ATOMIC_RELAXED);
      std::lock_guard<std::mutex> lock(mu);
      running -= runs.size() - threads.size();  // lanes that never start never count down
      break;
    }
  }
  LaneWatch watch(comms, runs);
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running > 0) {
      if (cv.wait_for(lock, std::chrono::milliseconds(10), [&] { return running == 0; })) break;
      if (!stopped.ok()) continue;
      lock.unlock();
      stopped = watch.check();
      if (!stopped.ok()) __atomic_store_n(&abortWord, 1u, __ATOMIC_RELAXED);
      lock.lock();
    }
  }
  for (std::thread& t : threads) t.join();
  BRAID_TRY(outcome(runs, stopped));
  // As the host executor: return once every message has left this process.
  for (auto& c : comms) BRAID_TRY(c->comm->lanePorts->waitBridgeFlushed(deadlineFromNow(c->comm)));
  return Result::success();
}

}  // namespace

bool laneExecutorApplies(const std::vector<Task>& tasks) {
  return std::all_of(tasks.begin(), tasks.end(), [](const Task& t) { return t.comm->settings.laneExecutor; });
}

bool lanesShareMemoryWithEveryPeer(const std::vector<Task>& tasks) {
  return std::all_of(tasks.begin(), tasks.end(), [](const Task& t) { return lanes::PortTable::reachable(t.comm); });
}

Result runLaneGroup(const std::vector<Task>& tasks) {
  std::vector<std::unique_ptr<CommRun>> comms;
  std::map<ncclComm*, CommRun*> byComm;
  for (const Task& t : tasks) {
    CommRun*& run = byComm[t.comm];
    if (!run) {
      comms.push_back(std::make_unique<CommRun>());
      run = comms.back().get();
      run->comm = t.comm;
    }
    run->tasks.push_back(&t);
  }
  for (auto& c : comms) BRAID_TRY(prepare(*c));
  BRAID_TRY(connect(comms));
  Result r = runLanes(comms);
  if (!r.ok() && r.code() == ncclRemoteError)
    for (auto& c : comms)
      if (c->comm->bootstrap) c->comm->bootstrap->notifyFailure(r.message(), -1, Clock::now() + std::chrono::seconds(1));
  return r;
}

}  // namespace braid
