// A program's lanes as one relocatable block of memory: the LaneExec array,
// then each lane's steps and port-pointer arrays, the operations' table, the
// stage counters and the LL staging buffers. It is built on the host with
// every pointer computed for the address where the block will be used, so
// host threads run it in place and a CUDA kernel runs it after one copy to
// device memory: both executors run the same bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/result.h"
#include "runtime/lanes/lane_program.h"

namespace braid {
namespace lanes {

// The Port of a FIFO end, in memory the lanes' runner reaches.
using PortOf = std::function<exec::Port*(const PortKey&)>;

// Bytes of the block of `program` with `nops` operations.
size_t laneImageBytes(const LaneProgram& program, size_t nops, uint64_t llStageBytes);

// Writes the block of `program` into `dst` (laneImageBytes, 8-byte aligned)
// for use at `base` (dst itself, or where it will be copied); the LaneExec
// array is at its start. `ops` are the operations' buffers and reductions
// (addresses the runner reaches); LL lanes get two staging buffers of
// llStageBytes (a multiple of 8, at least the LL payload); every wait polls
// `abortWord`; the stage counters start at zero.
Result writeLaneImage(const LaneProgram& program, const std::vector<exec::OpBuffers>& ops, const PortOf& portOf,
                      uint64_t llStageBytes, const uint32_t* abortWord, uintptr_t base, void* dst);

}  // namespace lanes
}  // namespace braid
