// Deterministic input data and exact result checking for the perf tools.
//
// Inputs are small integers (or 1/2 for products) chosen per type, operator
// and rank count so that every partial result of a reduction is exactly
// representable: sums, products, min and max must match bit for bit in every
// type, fp8 included. Only ncclAvg on floating types is compared with a
// tolerance, because NCCL pre-multiplies by 1/n there.
#pragma once

#include "common/collective.h"
#include "common/datatypes.h"

#include <cstdint>
#include <functional>

namespace braid::bench {

struct DataPattern {
  const TypeInfo* type = nullptr;
  ncclRedOp_t op = ncclSum;
  bool reduction = false;  // false: any value is fine (copies)
  int nranks = 1;
  uint64_t seed = 0;
  // Where not 0, what replaces the type's largest exact integer and epsilon
  // (forWireType).
  int64_t maxExactInt = 0;
  double epsilon = 0;
};

// `p` for a library whose float32 sums travel narrowed (BRAID_WIRE_TYPE): the
// inputs are integers the wire type holds exactly, partial sums included, so
// the check stays exact; an average is compared within the wire's precision.
DataPattern forWireType(DataPattern p);

// The value `rank` contributes at element `index` of its send data.
double inputValue(const DataPattern& p, int rank, size_t index);

// Fills `count` elements of `buf` with rank's inputs for indices
// [firstIndex, firstIndex + count).
void fillInput(const DataPattern& p, int rank, void* buf, size_t count, size_t firstIndex = 0);

// Counts elements of `data` that differ from what `expectAt(i)` describes.
int64_t countWrong(const DataPattern& p, const void* data, size_t count,
                   const std::function<Expect(size_t)>& expectAt);

// Fills / counts changed bytes of a guard area behind a buffer.
void fillGuard(void* data, size_t bytes);
int64_t countGuardDamage(const void* data, size_t bytes);

}  // namespace braid::bench
