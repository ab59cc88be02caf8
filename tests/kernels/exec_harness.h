// Test harness of the plan interpreter (kernels/executor): generates the plans
// of every rank of a collective, fills the ranks' buffers, and runs them
//  - through the interpreter, one host thread per lane per rank (as CUDA
//    blocks run) or every lane in turns on one thread (as the host runner
//    does), over FIFOs in heap memory (either protocol), and
//  - through a reference that applies every step with hostCopy and
//    hostReduce over unbounded message queues,
// so that tests compare the two bit for bit.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/executor/fifo_view.h"
#include "schedule/generate.h"

namespace exectest {

struct CollCase {
  braid::schedule::Collective coll = braid::schedule::Collective::AllReduce;
  braid::schedule::Algorithm algorithm = braid::schedule::Algorithm::Ring;
  int nranks = 2;
  size_t count = 0;  // CollShape's meaning; Send: the message (rank r sends to r+1 mod P)
  int root = 0;
  size_t chunkElems = 1;
  int nchannels = 1;
  ncclDataType_t type = ncclFloat32;
  ncclRedOp_t op = ncclSum;
  bool inPlace = false;  // AllReduce only: input and output are one buffer
};

// One schedule generatePlan has: a collective and an algorithm.
struct CollAlgo {
  braid::schedule::Collective coll;
  braid::schedule::Algorithm algorithm;
};

// Every schedule generatePlan has.
const std::vector<CollAlgo>& everySchedule();

// "AllReduceRing": a schedule as a test name.
std::string scheduleName(const CollAlgo& ca);

struct RunConfig {
  braid::executor::Protocol protocol = braid::executor::Protocol::Bulk;
  uint32_t nslots = 2;
  uint64_t fifoBase = 0;  // where every FIFO's counters start
  // Safety net of every wait: a broken plan or interpreter fails the test
  // instead of hanging it.
  uint64_t maxPolls = uint64_t(1) << 22;
  const uint32_t* abortFlag = nullptr;
  // Every lane of every rank takes turns on the calling thread, as the host
  // runner runs them (src/engine/lanes/lane_executor.cc): a wait that is not
  // ready returns and the lane resumes on its next turn. False: a thread per
  // lane, each waiting in place, as CUDA blocks do.
  bool oneThread = false;
  bool resumable = true;  // with oneThread: false shows that turns need resumable lanes
  // Without oneThread: the threads of each lane, an emulated CUDA block
  // (tests/emulation/thread_block.h) when more than one.
  uint32_t threadsPerLane = 1;
  // Every lane of every rank shares one failure word (LaneExec::failure and
  // WaitControl::stopFlag), as the lanes of one launch do; *failureWord
  // gets its value.
  bool shareFailure = false;
  uint32_t* failureWord = nullptr;
  // Failure injection: lane `failLane` (counting every lane of every rank
  // in rank order) gets a step naming a port it lacks (BadStep) in place of
  // its first step. -1: none.
  int failLane = -1;
  // With threadsPerLane > 1: blocks whose barriers do nothing (a broken
  // kernel, for the emulation's self-test).
  bool brokenBarriers = false;
  // The GPU's scheduling, emulated (tests/emulation/gpu_scheduler.h): the
  // lanes of each launch (a list of ranks, all of whose lanes it holds) are
  // dispatched in issue order onto `residentSlots` slots, one lane a slot;
  // a lane runs only once dispatched and keeps its slot until it ends (no
  // preemption). Empty: every lane runs at once.
  std::vector<std::vector<int>> launches;
  uint32_t residentSlots = 0;
};

struct RankData {
  std::vector<uint8_t> input;   // empty where the rank has none
  std::vector<uint8_t> output;  // in-place: holds the input too, `input` empty
  std::vector<uint8_t> scratch;
};

std::string describe(const CollCase& c);

// Every rank's plan.
std::vector<braid::schedule::Plan> makePlans(const CollCase& c);

// Buffers of every rank, inputs filled from `seed` (moderate values plus some
// NaN, infinities and other bit patterns for floating types).
std::vector<RankData> makeData(const CollCase& c, const std::vector<braid::schedule::Plan>& plans, uint64_t seed);

// Runs the plans through the reference; "" or what went wrong.
std::string runReference(const CollCase& c, const std::vector<braid::schedule::Plan>& plans, std::vector<RankData>* data);

// Runs the plans through the interpreter; "" when every lane returned Ok,
// otherwise each failed lane's status and step. `statuses` (optional) gets
// every lane's status, rank by rank.
std::string runInterpreter(const CollCase& c, const RunConfig& cfg, const std::vector<braid::schedule::Plan>& plans,
                           std::vector<RankData>* data, std::vector<braid::executor::ExecStatus>* statuses = nullptr);

// "" when the outputs are equal bit for bit, else the first differences.
std::string compareOutputs(const CollCase& c, const std::vector<RankData>& want, const std::vector<RankData>& got);

// Generates, runs both ways, compares: "" on success.
std::string runAndCompare(const CollCase& c, const RunConfig& cfg, uint64_t seed);

}  // namespace exectest
