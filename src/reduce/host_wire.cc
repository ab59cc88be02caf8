// The host's wire-step loops (wire_loops.h), one entry per codec, each built
// twice by GCC's target_clones on x86-64: for AVX2 (eight floats per
// instruction) and for the baseline, chosen once at load by the CPU. The bits
// are the same either way (no fused or reassociated arithmetic).
#include "reduce/wire_loops.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define BRAID_WIRE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define BRAID_WIRE_CLONES
#endif

namespace braid::reduce {
namespace {

BRAID_WIRE_CLONES void runBf16(const WirePiece& p) { runWirePieceAs<WireBf16>(p); }
BRAID_WIRE_CLONES void runF16(const WirePiece& p) { runWirePieceAs<WireF16>(p); }
BRAID_WIRE_CLONES void runE4M3(const WirePiece& p) { runWirePieceAs<WireE4M3>(p); }
BRAID_WIRE_CLONES void runE5M2(const WirePiece& p) { runWirePieceAs<WireE5M2>(p); }
BRAID_WIRE_CLONES void runE4M3OfBf16(const WirePiece& p) { runWirePieceAs<WireE4M3, BFloat16>(p); }
BRAID_WIRE_CLONES void runE5M2OfBf16(const WirePiece& p) { runWirePieceAs<WireE5M2, BFloat16>(p); }

}  // namespace

void runWirePieceOnHost(const WirePiece& p) {
  if (p.data == ncclBfloat16) {
    if (p.wire == WireType::Fp8E4M3) return runE4M3OfBf16(p);
    if (p.wire == WireType::Fp8E5M2) return runE5M2OfBf16(p);
    return;  // no other wire is narrower than bfloat16 (engine/task_plan.cc)
  }
  switch (p.wire) {
    case WireType::BFloat16: return runBf16(p);
    case WireType::Float16: return runF16(p);
    case WireType::Fp8E4M3: return runE4M3(p);
    case WireType::Fp8E5M2: return runE5M2(p);
    case WireType::None: return;
  }
}

}  // namespace braid::reduce
