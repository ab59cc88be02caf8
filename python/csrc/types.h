// PyTorch dtypes and reduce ops in NCCL's terms.
#pragma once

#include <ATen/ATen.h>
#include <nccl.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstdint>
#include <string>

namespace braid_torch {

// How one reduction runs for one dtype.
//  Native:   NCCL reduces `type` elements with `op` (PREMUL_SUM: `preMul`).
//  Gathered: NCCL only moves bytes (all-gather); every rank then reduces the
//            stacked contributions with ATen. Used where NCCL has no operator
//            (bitwise ops) or no element type (int16, uint16).
struct ReduceSpec {
  enum class Path { Native, Gathered };
  Path path = Path::Native;
  ncclDataType_t type = ncclFloat32;
  int64_t elementsPerItem = 1;  // 2: complex numbers reduced as (re, im) pairs
  ncclRedOp_t op = ncclSum;
  bool preMul = false;
  double factor = 1.0;       // PREMUL_SUM with a Python number
  at::Tensor factorTensor;   // PREMUL_SUM with a one-element tensor
  c10d::ReduceOp::RedOpType torchOp = c10d::ReduceOp::SUM;
};

// The plan for reducing `dtype` tensors with `op` in the collective `what`
// ("allreduce", ...). Throws c10::Error naming the op, dtype and the reason when
// the combination has no meaning (BAND on floats, MAX on complex, ...).
ReduceSpec reduceSpecFor(const c10d::ReduceOp& op, at::ScalarType dtype, const char* what);

// Reduces the first dimension of `stacked` (one slice per rank) as `op` does
// and returns a tensor of stacked's dtype; `nranks` divides for AVG.
at::Tensor reduceStacked(const at::Tensor& stacked, c10d::ReduceOp::RedOpType op, int nranks);

// The scalar of a PreMulSum op as NCCL reads it (the bytes of one `type` element).
void encodeScalar(double value, ncclDataType_t type, uint8_t out[8]);

std::string reduceOpName(c10d::ReduceOp::RedOpType op);

}  // namespace braid_torch
