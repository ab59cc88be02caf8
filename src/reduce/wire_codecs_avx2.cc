// Where the AVX2 wire codecs (wire_codecs_avx2.h) may run.
#include "reduce/wire_codecs_avx2.h"

namespace braid::reduce {

bool wireCodecsAvx2Usable() {
#if BRAID_WIRE_AVX2
  static const bool usable = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return usable;
#else
  return false;
#endif
}

}  // namespace braid::reduce
