// The layout of every struct the host writes and a CUDA kernel reads (the
// lane image, kernels/README.md), pinned: this header is compiled in the
// host pass and in nvcc's device pass (plan_interpreter.h includes it), so a
// field that a compiler placed differently on either side, or a change that
// forgets the other side, fails the build instead of corrupting a lane.
// 64-bit pointers on both sides.
#pragma once

#include <cstddef>

#include "kernels/executor/plan_interpreter.h"

namespace braid::executor {

static_assert(sizeof(void*) == 8, "the lane image assumes 64-bit pointers on host and device");
static_assert(sizeof(WaitControl) == 40 && alignof(WaitControl) == 8, "WaitControl layout");
static_assert(offsetof(WaitControl, abortFlag) == 0, "WaitControl::abortFlag");
static_assert(offsetof(WaitControl, stopFlag) == 8, "WaitControl::stopFlag");
static_assert(offsetof(WaitControl, maxPolls) == 16, "WaitControl::maxPolls");
static_assert(offsetof(WaitControl, resumable) == 24, "WaitControl::resumable");
static_assert(offsetof(WaitControl, beacon) == 32, "WaitControl::beacon");
static_assert(sizeof(LaneBeacon) == 40 && alignof(LaneBeacon) == 8, "LaneBeacon layout");
static_assert(offsetof(LaneBeacon, step) == 0, "LaneBeacon::step");
static_assert(offsetof(LaneBeacon, waitingOn) == 8, "LaneBeacon::waitingOn");
static_assert(offsetof(LaneBeacon, beats) == 16, "LaneBeacon::beats");
static_assert(offsetof(LaneBeacon, ended) == 24, "LaneBeacon::ended");
static_assert(offsetof(LaneBeacon, receivedFingerprint) == 32, "LaneBeacon::receivedFingerprint");
static_assert(sizeof(FifoView) == 56 && alignof(FifoView) == 8, "FifoView layout");
static_assert(offsetof(FifoView, head) == 0, "FifoView::head");
static_assert(offsetof(FifoView, tail) == 8, "FifoView::tail");
static_assert(offsetof(FifoView, sizes) == 16, "FifoView::sizes");
static_assert(offsetof(FifoView, slots) == 24, "FifoView::slots");
static_assert(offsetof(FifoView, slotStride) == 32, "FifoView::slotStride");
static_assert(offsetof(FifoView, payloadBytes) == 40, "FifoView::payloadBytes");
static_assert(offsetof(FifoView, nslots) == 48, "FifoView::nslots");
static_assert(offsetof(FifoView, protocol) == 52, "FifoView::protocol");
static_assert(sizeof(Port) == 72 && alignof(Port) == 8, "Port layout");
static_assert(offsetof(Port, fifo) == 0, "Port::fifo");
static_assert(offsetof(Port, seq) == 56, "Port::seq");
static_assert(offsetof(Port, seen) == 64, "Port::seen");
static_assert(sizeof(ExecStep) == 56 && alignof(ExecStep) == 8, "ExecStep layout");
static_assert(offsetof(ExecStep, kind) == 0, "ExecStep::kind");
static_assert(offsetof(ExecStep, srcBuffer) == 1, "ExecStep::srcBuffer");
static_assert(offsetof(ExecStep, dstBuffer) == 2, "ExecStep::dstBuffer");
static_assert(offsetof(ExecStep, flags) == 3, "ExecStep::flags");
static_assert(offsetof(ExecStep, sendPort) == 4, "ExecStep::sendPort");
static_assert(offsetof(ExecStep, recvPort) == 8, "ExecStep::recvPort");
static_assert(offsetof(ExecStep, op) == 12, "ExecStep::op");
static_assert(offsetof(ExecStep, waitStage) == 16, "ExecStep::waitStage");
static_assert(offsetof(ExecStep, doneStage) == 20, "ExecStep::doneStage");
static_assert(offsetof(ExecStep, waitCount) == 24, "ExecStep::waitCount");
static_assert(offsetof(ExecStep, srcOffset) == 32, "ExecStep::srcOffset");
static_assert(offsetof(ExecStep, dstOffset) == 40, "ExecStep::dstOffset");
static_assert(offsetof(ExecStep, count) == 48, "ExecStep::count");
static_assert(sizeof(reduce::RedOp) == 24 && alignof(reduce::RedOp) == 8, "RedOp layout");
static_assert(offsetof(reduce::RedOp, kind) == 0, "RedOp::kind");
static_assert(offsetof(reduce::RedOp, type) == 4, "RedOp::type");
static_assert(offsetof(reduce::RedOp, scalar) == 8, "RedOp::scalar");
static_assert(offsetof(reduce::RedOp, divisor) == 16, "RedOp::divisor");
static_assert(sizeof(OpBuffers) == 80 && alignof(OpBuffers) == 8, "OpBuffers layout");
static_assert(offsetof(OpBuffers, input) == 0, "OpBuffers::input");
static_assert(offsetof(OpBuffers, output) == 8, "OpBuffers::output");
static_assert(offsetof(OpBuffers, scratch) == 16, "OpBuffers::scratch");
static_assert(offsetof(OpBuffers, op) == 24, "OpBuffers::op");
static_assert(offsetof(OpBuffers, fingerprint) == 48, "OpBuffers::fingerprint");
static_assert(offsetof(OpBuffers, wire) == 52, "OpBuffers::wire");
static_assert(offsetof(OpBuffers, roundFinal) == 53, "OpBuffers::roundFinal");
static_assert(offsetof(OpBuffers, peers) == 56, "OpBuffers::peers");
static_assert(offsetof(OpBuffers, npeers) == 64, "OpBuffers::npeers");
static_assert(offsetof(OpBuffers, fixedShifts) == 72, "OpBuffers::fixedShifts");
static_assert(sizeof(LaneExec) == 192 && alignof(LaneExec) == 8, "LaneExec layout");
static_assert(offsetof(LaneExec, steps) == 0, "LaneExec::steps");
static_assert(offsetof(LaneExec, nsteps) == 8, "LaneExec::nsteps");
static_assert(offsetof(LaneExec, sendPorts) == 16, "LaneExec::sendPorts");
static_assert(offsetof(LaneExec, nsendPorts) == 24, "LaneExec::nsendPorts");
static_assert(offsetof(LaneExec, recvPorts) == 32, "LaneExec::recvPorts");
static_assert(offsetof(LaneExec, nrecvPorts) == 40, "LaneExec::nrecvPorts");
static_assert(offsetof(LaneExec, ops) == 48, "LaneExec::ops");
static_assert(offsetof(LaneExec, nops) == 56, "LaneExec::nops");
static_assert(offsetof(LaneExec, stages) == 64, "LaneExec::stages");
static_assert(offsetof(LaneExec, nstages) == 72, "LaneExec::nstages");
static_assert(offsetof(LaneExec, recvStage) == 80, "LaneExec::recvStage");
static_assert(offsetof(LaneExec, sendStage) == 88, "LaneExec::sendStage");
static_assert(offsetof(LaneExec, stageBytes) == 96, "LaneExec::stageBytes");
static_assert(offsetof(LaneExec, wait) == 104, "LaneExec::wait");
static_assert(offsetof(LaneExec, failedStep) == 144, "LaneExec::failedStep");
static_assert(offsetof(LaneExec, receivedFingerprint) == 148, "LaneExec::receivedFingerprint");
static_assert(offsetof(LaneExec, currentStep) == 152, "LaneExec::currentStep");
static_assert(offsetof(LaneExec, waitingOn) == 160, "LaneExec::waitingOn");
static_assert(offsetof(LaneExec, resumePhase) == 168, "LaneExec::resumePhase");
static_assert(offsetof(LaneExec, resumeLines) == 176, "LaneExec::resumeLines");
static_assert(offsetof(LaneExec, failure) == 184, "LaneExec::failure");

}  // namespace braid::executor
