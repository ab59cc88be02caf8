// Internal to src/reduce: faster paths for the narrow float types, used by
// host_reduce.cc in front of the portable loops. Each *F16C/*Avx2/*Table
// function returns how many leading elements it produced (0 when it does not
// apply, e.g. the CPU lacks the instructions); the portable loops finish the
// rest. Results are the same bit for bit whichever path runs.
#pragma once

#include <cstddef>

#include "reduce/host_reduce.h"
#include "reduce/numeric.h"

namespace braid::reduce {

// hostCopy/hostReduce, with `fast` false to skip every path below and run only
// the portable loops (tests check both; benchmarks compare them).
void hostCopyWith(const RedOp& op, void* dst, const void* src, size_t count,
                  bool srcIsContribution, bool final, bool fast);
void hostReduceWith(const RedOp& op, void* dst, const void* a, const void* b, size_t count,
                    bool bIsContribution, bool final, bool fast);

// float16 through the F16C conversion instructions, when the CPU has them.
size_t reduceHalfF16C(const RedOp& op, Half* dst, const Half* a, const Half* b, size_t count,
                      bool pre, bool post);
size_t copyHalfF16C(const RedOp& op, Half* dst, const Half* src, size_t count, bool pre,
                    bool post);

// bfloat16 through the portable loops built for AVX2, when the CPU has it.
size_t reduceBf16Avx2(const RedOp& op, BFloat16* dst, const BFloat16* a, const BFloat16* b,
                      size_t count, bool pre, bool post);
size_t copyBf16Avx2(const RedOp& op, BFloat16* dst, const BFloat16* src, size_t count, bool pre,
                    bool post);

// fp8 through 64 KiB tables of results indexed by the two operands' bits.
size_t reduceFp8Table(const RedOp& op, uint8_t* dst, const uint8_t* a, const uint8_t* b,
                      size_t count, bool pre, bool post);
size_t copyFp8Table(const RedOp& op, uint8_t* dst, const uint8_t* src, size_t count, bool pre,
                    bool post);

}  // namespace braid::reduce
