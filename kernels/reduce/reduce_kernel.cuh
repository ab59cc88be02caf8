// The element-wise reduction kernel, templated on the storage type and the
// operator functor of src/reduce/reduce_ops.h.
#pragma once

#include <cstddef>

#include "reduce/reduce_ops.h"

namespace braid {
namespace kernels {

// Grid-stride loop so that any grid size covers any count. No __restrict__:
// dst may alias a or b, and each element is read before it is written.
template <class T, class Fn>
__global__ void reduceKernel(Fn fn, T* dst, const T* a, const T* b, size_t n) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    dst[i] = fn(a[i], b[i]);
  }
}

}  // namespace kernels
}  // namespace braid
