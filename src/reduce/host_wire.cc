// The host's wire-step loops (wire_loops.h), one entry per codec and data
// type. The scaled wire types (float16, fp8) run with the AVX2 codecs of
// wire_codecs_avx2.h where the CPU has AVX2 and F16C, with the loops around
// them built for AVX2 too; elsewhere with the portable codecs, built for the
// baseline CPU. bfloat16 travels unscaled, value by value: GCC's target_clones
// builds it twice on x86-64, for AVX2 (eight floats per instruction) and for
// the baseline, chosen once at load by the CPU. The bits are the same every
// way (no fused or reassociated arithmetic; the AVX2 codecs are tested
// against the portable ones bit for bit).
#include "reduce/wire_codecs_avx2.h"
#include "reduce/wire_loops.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define BRAID_WIRE_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define BRAID_WIRE_CLONES
#endif

// The loops around the AVX2 codecs, built for AVX2 with the codecs inlined
// (flatten: see wire_codecs_avx2.h).
#define BRAID_WIRE_AVX2_ATTR __attribute__((target("avx2,f16c"), flatten))

namespace braid::reduce {
namespace {

BRAID_WIRE_CLONES void runBf16(const WirePiece& p) { runWirePieceAs<WireBf16>(p); }

void runF16(const WirePiece& p) { runWirePieceAs<WireF16>(p); }
void runE4M3(const WirePiece& p) { runWirePieceAs<WireE4M3>(p); }
void runE5M2(const WirePiece& p) { runWirePieceAs<WireE5M2>(p); }
void runE4M3OfBf16(const WirePiece& p) { runWirePieceAs<WireE4M3, BFloat16>(p); }
void runE5M2OfBf16(const WirePiece& p) { runWirePieceAs<WireE5M2, BFloat16>(p); }

#if BRAID_WIRE_AVX2
BRAID_WIRE_AVX2_ATTR void runF16Avx2(const WirePiece& p) { runWirePieceAs<WireF16Avx2>(p); }
BRAID_WIRE_AVX2_ATTR void runE4M3Avx2(const WirePiece& p) { runWirePieceAs<WireE4M3Avx2>(p); }
BRAID_WIRE_AVX2_ATTR void runE5M2Avx2(const WirePiece& p) { runWirePieceAs<WireE5M2Avx2>(p); }
BRAID_WIRE_AVX2_ATTR void runE4M3OfBf16Avx2(const WirePiece& p) { runWirePieceAs<WireE4M3Avx2, BFloat16>(p); }
BRAID_WIRE_AVX2_ATTR void runE5M2OfBf16Avx2(const WirePiece& p) { runWirePieceAs<WireE5M2Avx2, BFloat16>(p); }
#endif

// The scaled wire types' loops on one set of codecs.
struct ScaledLoops {
  void (*f16)(const WirePiece&);
  void (*e4m3)(const WirePiece&);
  void (*e5m2)(const WirePiece&);
  void (*e4m3OfBf16)(const WirePiece&);
  void (*e5m2OfBf16)(const WirePiece&);
};

// The AVX2 codecs where the CPU has them, else the portable ones.
const ScaledLoops& scaledLoops() {
  static constexpr ScaledLoops kPortable{runF16, runE4M3, runE5M2, runE4M3OfBf16, runE5M2OfBf16};
#if BRAID_WIRE_AVX2
  static constexpr ScaledLoops kAvx2{runF16Avx2, runE4M3Avx2, runE5M2Avx2, runE4M3OfBf16Avx2, runE5M2OfBf16Avx2};
  if (wireCodecsAvx2Usable()) return kAvx2;
#endif
  return kPortable;
}

}  // namespace

void runWirePieceOnHost(const WirePiece& p) {
  const ScaledLoops& scaled = scaledLoops();
  if (p.data == ncclBfloat16) {
    if (p.wire == WireType::Fp8E4M3) return scaled.e4m3OfBf16(p);
    if (p.wire == WireType::Fp8E5M2) return scaled.e5m2OfBf16(p);
    return;  // no other wire is narrower than bfloat16 (engine/task_plan.cc)
  }
  switch (p.wire) {
    case WireType::BFloat16: return runBf16(p);
    case WireType::Float16: return scaled.f16(p);
    case WireType::Fp8E4M3: return scaled.e4m3(p);
    case WireType::Fp8E5M2: return scaled.e5m2(p);
    case WireType::None:
    case WireType::Fixed64: return;  // reduce/fixed_point.h runs fixed-point steps
  }
}

}  // namespace braid::reduce
