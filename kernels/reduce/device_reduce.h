// Element-wise reductions on device memory: the device counterpart of
// hostReduce (src/reduce/host_reduce.h), with the same semantics bit for bit,
// because both evaluate the operators of src/reduce/reduce_ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "core/result.h"
#include "reduce/host_reduce.h"

namespace braid {
namespace kernels {

// Enqueues dst = post(a OP pre(b)) for `count` elements of op.type on `stream`
// and returns without waiting. `pre` (PreMulSum's scaling) applies when
// bIsContribution, `post` (SumPostDiv's division) when final; otherwise those
// ops reduce as Sum, as on the host. dst may alias a or b. All three pointers
// must be device-accessible. Errors: a bad type (ncclInvalidArgument), fp8
// below sm_90 (ncclInvalidUsage), a launch failure (ncclUnhandledCudaError).
Result launchReduce(const RedOp& op, void* dst, const void* a, const void* b, size_t count,
                    bool bIsContribution, bool final, cudaStream_t stream);

}  // namespace kernels
}  // namespace braid
