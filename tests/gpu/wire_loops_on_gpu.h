// A wire piece run on the GPU by the loops a plan kernel's block runs
// (kernels/executor/wire_step.h runWirePieceInBlock), on copies of its host
// buffers, the results copied back into them: what
// tests/reduce/wire_codecs_avx2_test.cc holds to the host's loops when
// tests/gpu builds it as gpu_wire_loops_test. The piece's share (firstGroup
// f, stride s: the whole piece is 0, 1) is split again over the threads of
// two blocks, as a block splits a step's groups over its threads. CUDA errors
// fail the calling test.
#pragma once

#include "reduce/wire_loops.h"

namespace gputest {

void runWirePieceLoopsOnGpu(const braid::reduce::WirePiece& p);

}  // namespace gputest
