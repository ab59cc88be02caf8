// Reproducible reductions (braidCommSetReproducible, BRAID_REPRODUCIBLE=1):
// sum and avg over float32, float64, float16 and bfloat16 whose result bits
// depend only on the ranks' contributions, whatever algorithm, channels,
// protocol, transport or rank placement runs them.
//
// The accumulation is integer, so associative: the ranks first agree on each
// block's largest exponent (an int32 MAX allreduce of kBlockElems-element
// blocks), each rank turns its values into 64-bit fixed point relative to
// that exponent (rounded to nearest, once, on the rank that owns the value),
// the integers are summed by an ordinary int64 collective of the same kind,
// and the owner of each result turns it back into the datatype (rounded
// once more). docs/algorithms.md gives the error bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/result.h"
#include "engine/task.h"
#include "reduce/fixed_point.h"

namespace braid::core {

namespace reproducible {

constexpr size_t kBlockElems = reduce::fixed::kBlockElems;

// Whether the task is one the mode changes (the others are exact already).
bool applies(const engine::Task& t);

// The per-block agreement word pairs: [2b] the largest exponent of a finite
// non-zero value in block b (kNoExponent where there is none), [2b+1] 1 where
// the block holds a NaN or an infinity.
constexpr int32_t kNoExponent = INT32_MIN / 2;
void blockExponents(const void* values, ncclDataType_t type, size_t count, int32_t* words);

// The fixed-point shift of a block whose agreed exponent is `emax`, for sums
// of `nranks` values of `type`: every |value| * 2^shift < 2^B / 2^ceil(log2
// nranks), with B = 51 for float32 (every sum then is exact in a double: the
// vector units convert both ways in two instructions, reduce/fixed_point.h)
// and 62 for the other types (float64 keeps more bits than its own sum).
int fixedPointShift(int32_t emax, int nranks, ncclDataType_t type);

// values -> round(value * 2^shift of its block); non-finite values give 0.
void toFixed(const void* values, ncclDataType_t type, size_t count, const int32_t* words, int nranks,
             int64_t* fixed);

// Non-finite values as counts a sum can carry: NaN in bits 42.., +inf in
// 21.., -inf in 0.. (at most 2^21 - 1 ranks).
void specialCodes(const void* values, ncclDataType_t type, size_t count, int64_t* codes);

// The datatype's value of each sum (first element at `first` of the blocked
// layout), divided by `divisor` (avg: nranks; sum: 1); codes may be null
// where no block held a non-finite value.
void fromFixed(const int64_t* sums, const int64_t* codes, ncclDataType_t type, size_t count, size_t first,
               const int32_t* words, int nranks, int divisor, void* out);

// Runs a task for which applies() holds: the exponents, the integer
// collective and the conversions, on host buffers. Outside a group: a call
// made inside one runs when the group ends, after its other calls.
Result run(const engine::Task& t);

}  // namespace reproducible

}  // namespace braid::core
