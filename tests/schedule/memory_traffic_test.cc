// The memory traffic of plans (schedule/memory_traffic.h): for ranks that
// share a GPU, device memory is what bounds a collective, and a direct
// reduction is the floor: each of p ranks reads its 1/p of every rank's buffer
// and writes it to every rank's output, 2 x the buffer per rank, 2p x the
// buffer in all (8 x over 4 ranks). What the planner chooses for such ranks
// must move no more.
#include "schedule/memory_traffic.h"

#include <gtest/gtest.h>

#include "schedule/generate.h"
#include "tuning/planner.h"

namespace braid {
namespace {

// Every rank's traffic for `shape`, summed.
double totalTraffic(schedule::CollShape shape, size_t elemSize) {
  double total = 0;
  for (int r = 0; r < shape.nranks; ++r) {
    shape.rank = r;
    total += schedule::memoryTraffic(schedule::generatePlan(shape), elemSize, shape.nranks).total();
  }
  return total;
}

// The plan the planner gives a float32 allreduce of `count` over 4 ranks of
// one process on one GPU (every rank's buffers addressable: peerAccess), with
// the device engine's channels.
schedule::CollShape sameGpuAllReduce(size_t count, bool peerAccess) {
  const tuning::CalibrationParams cal = tuning::defaultCalibration();
  tuning::TuningInput in;
  in.coll = schedule::Collective::AllReduce;
  in.nranks = 4;
  in.count = count;
  in.datatype = ncclFloat32;
  in.transport = tuning::TransportClass::InProcess;
  in.nchannels = 8;
  in.calibration = &cal;
  in.peerAccess = peerAccess;
  const tuning::PlanChoice choice = tuning::choosePlan(in);
  schedule::CollShape s;
  s.coll = in.coll;
  s.nranks = in.nranks;
  s.count = count;
  s.algorithm = choice.algorithm;
  s.chunkElems = choice.chunkElems;
  s.nchannels = choice.nchannels;
  return s;
}

TEST(MemoryTraffic, SameGpuAllReduceMovesNoMoreThanADirectReduction) {
  for (size_t count : {size_t(1) << 28, size_t(1000003), size_t(4096), size_t(7)}) {
    const double buffer = double(count) * sizeof(float);
    const schedule::CollShape chosen = sameGpuAllReduce(count, true);
    EXPECT_EQ(chosen.algorithm, schedule::Algorithm::PeerAccess) << count;
    EXPECT_LE(totalTraffic(chosen, sizeof(float)), 8 * buffer) << count;
    EXPECT_EQ(totalTraffic(chosen, sizeof(float)), 8 * buffer) << count;  // every byte read and written once
  }
}

// Through FIFOs the same allreduce moves several times more: every message is
// written into a slot and read out of it, and a ring's fused steps read their
// result back. The count is what makes the comparison meaningful.
TEST(MemoryTraffic, FifoSchedulesMoveMoreThanADirectReduction) {
  const size_t count = size_t(1) << 26;
  const double buffer = double(count) * sizeof(float);
  const schedule::CollShape fifo = sameGpuAllReduce(count, false);
  EXPECT_NE(fifo.algorithm, schedule::Algorithm::PeerAccess);
  EXPECT_GT(totalTraffic(fifo, sizeof(float)), 8 * buffer);
  schedule::CollShape ring = fifo;
  ring.algorithm = schedule::Algorithm::Ring;
  // 4 ranks: a send (2), two recvReduceSends (3 each), a recvReduceCopySend
  // (5), two recvCopySends (4 each) and a recv (2) of a quarter each: 23/4.
  EXPECT_DOUBLE_EQ(totalTraffic(ring, sizeof(float)), 4 * 23.0 / 4 * buffer);
}

TEST(MemoryTraffic, CountsEachStepKind) {
  schedule::Plan plan;
  schedule::Lane lane;
  schedule::Step st;
  st.count = 10;
  st.kind = schedule::StepKind::RecvReduceCopySend;
  lane.steps.push_back(st);
  st.kind = schedule::StepKind::Copy;  // onto itself: nothing
  lane.steps.push_back(st);
  st.kind = schedule::StepKind::PeerReduce;
  st.peerSrc = true;
  lane.steps.push_back(st);
  plan.lanes.push_back(lane);
  const schedule::MemoryTraffic t = schedule::memoryTraffic(plan, 4, 3);
  EXPECT_EQ(t.readBytes, (3 + 3 * 1) * 40.0);
  EXPECT_EQ(t.writtenBytes, (2 + 1) * 40.0);
}

}  // namespace
}  // namespace braid
