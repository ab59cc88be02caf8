// Reductions on host memory for every NCCL datatype, and the description of a
// reduction operator shared by the host loops and the plan interpreter.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace braid::reduce {

// What the executor computes. ncclAvg becomes PreMulSum(1/nranks) for floating
// types and SumPostDiv(nranks) for integers, as NCCL does.
enum class RedKind : uint8_t { Sum, Prod, Max, Min, PreMulSum, SumPostDiv };

struct RedOp {
  RedKind kind = RedKind::Sum;
  ncclDataType_t type = ncclFloat32;
  // PreMulSum: the scalar, stored in `type`'s own representation.
  alignas(8) uint8_t scalar[8] = {};
  // SumPostDiv: the divisor.
  uint64_t divisor = 1;
};

// The same reduction: every field, so that one added later is compared too.
inline bool operator==(const RedOp& a, const RedOp& b) {
  return a.kind == b.kind && a.type == b.type && a.divisor == b.divisor &&
         std::memcmp(a.scalar, b.scalar, sizeof a.scalar) == 0;
}

// Size in bytes of one element; 0 for an invalid type.
size_t typeSize(ncclDataType_t type);
// "float32", "bfloat16", "float8e4m3", ...; "invalid" for a bad value.
const char* typeName(ncclDataType_t type);
bool isFloatingType(ncclDataType_t type);

// Builds the executor's view of a built-in op for a communicator of `nranks`.
RedOp makeBuiltinOp(ncclRedOp_t op, ncclDataType_t type, int nranks);
// PreMulSum whose scalar is read from host memory in `type`'s representation.
RedOp makePreMulSum(ncclDataType_t type, const void* scalar);

// dst = post(pre(src)): `pre` is the PreMulSum scaling, applied when src is a
// rank's own contribution; `post` is SumPostDiv's division, applied when this
// produces the final value. Neither flag set is a plain copy. dst may equal src.
void hostCopy(const RedOp& op, void* dst, const void* src, size_t count, bool srcIsContribution,
              bool final);

// dst = post(a OP pre(b)): `a` is a partial result received from a peer, `b` is
// local data (a contribution when bIsContribution). dst may alias a or b.
void hostReduce(const RedOp& op, void* dst, const void* a, const void* b, size_t count,
                bool bIsContribution, bool final);

}  // namespace braid::reduce
