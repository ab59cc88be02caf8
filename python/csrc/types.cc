#include "types.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e5m2.h>
#include <c10/util/Half.h>

#include <cstring>
#include <optional>

namespace braid_torch {

namespace {

using RedOp = c10d::ReduceOp::RedOpType;

std::optional<ncclDataType_t> ncclType(at::ScalarType t) {
  switch (t) {
    case at::kBool:  // 0/1 bytes: reduced as uint8 with MAX/MIN standing for OR/AND
    case at::kByte: return ncclUint8;
    case at::kChar: return ncclInt8;
    case at::kInt: return ncclInt32;
    case at::kUInt32: return ncclUint32;
    case at::kLong: return ncclInt64;
    case at::kUInt64: return ncclUint64;
    case at::kHalf: return ncclFloat16;
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kBFloat16: return ncclBfloat16;
    case at::kFloat8_e4m3fn: return ncclFloat8e4m3;
    case at::kFloat8_e5m2: return ncclFloat8e5m2;
    default: return std::nullopt;
  }
}

bool isBitwise(RedOp op) {
  return op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR;
}

// Integer types ATen can reduce locally though NCCL has no element type for them.
bool gatherableInteger(at::ScalarType t) {
  return t == at::kShort || t == at::kUInt16;
}

[[noreturn]] void refuse(const char* what, RedOp op, at::ScalarType t, const std::string& why) {
  TORCH_CHECK(false, "braid: ", what, " with ReduceOp.", reduceOpName(op), " on ", c10::toString(t),
              " tensors is not supported: ", why);
}

void fillPreMul(const c10d::ReduceOp& op, at::ScalarType t, const char* what, ReduceSpec* s) {
  auto* sup = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  TORCH_CHECK(sup != nullptr, "braid: ", what,
              " with PREMUL_SUM needs the factor made by torch.distributed._make_nccl_premul_sum");
  s->preMul = true;
  if (sup->tensor_factor.defined()) {
    TORCH_CHECK(sup->tensor_factor.numel() == 1, "braid: PREMUL_SUM factor must have one element");
    s->factorTensor = sup->tensor_factor;
  } else {
    s->factor = sup->double_factor;
  }
}

}  // namespace

std::string reduceOpName(RedOp op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNKNOWN(" + std::to_string(static_cast<int>(op)) + ")";
  }
}

ReduceSpec reduceSpecFor(const c10d::ReduceOp& rop, at::ScalarType t, const char* what) {
  const RedOp op = rop.op_;
  ReduceSpec s;
  s.torchOp = op;
  if (at::isComplexType(t)) {
    // (re, im) pairs reduce independently only for linear ops, as with PyTorch's NCCL backend.
    if (op != c10d::ReduceOp::SUM && op != c10d::ReduceOp::AVG && op != c10d::ReduceOp::PREMUL_SUM)
      refuse(what, op, t, "only SUM, AVG and PREMUL_SUM are defined for complex numbers");
    s.type = t == at::kComplexDouble ? ncclFloat64 : ncclFloat32;
    TORCH_CHECK(t != at::kComplexHalf, "braid: ", what, " on complex32 tensors is not supported");
    s.elementsPerItem = 2;
    s.op = op == c10d::ReduceOp::AVG ? ncclAvg : ncclSum;
    if (op == c10d::ReduceOp::PREMUL_SUM) fillPreMul(rop, t, what, &s);
    return s;
  }
  const bool floating = at::isFloatingType(t);
  if (isBitwise(op)) {
    if (floating) refuse(what, op, t, "bitwise ops need integer or bool tensors");
    // NCCL has no bitwise operators; AND/OR of 0/1 bytes are MIN/MAX.
    if (t == at::kBool && op != c10d::ReduceOp::BXOR) {
      s.type = ncclUint8;
      s.op = op == c10d::ReduceOp::BAND ? ncclMin : ncclMax;
      return s;
    }
    if (!ncclType(t) && !gatherableInteger(t)) refuse(what, op, t, "unsupported dtype");
    s.path = ReduceSpec::Path::Gathered;
    return s;
  }
  if (op == c10d::ReduceOp::PREMUL_SUM) {
    if (!floating || !ncclType(t)) refuse(what, op, t, "PREMUL_SUM needs a floating-point NCCL type");
    s.type = *ncclType(t);
    fillPreMul(rop, t, what, &s);
    return s;
  }
  if (t == at::kBool) {
    // Booleans as PyTorch's backends treat them: SUM is OR, PRODUCT is AND.
    if (op == c10d::ReduceOp::AVG) refuse(what, op, t, "AVG has no boolean result");
    s.type = ncclUint8;
    s.op = (op == c10d::ReduceOp::SUM || op == c10d::ReduceOp::MAX) ? ncclMax : ncclMin;
    return s;
  }
  switch (op) {
    case c10d::ReduceOp::SUM: s.op = ncclSum; break;
    case c10d::ReduceOp::AVG: s.op = ncclAvg; break;
    case c10d::ReduceOp::PRODUCT: s.op = ncclProd; break;
    case c10d::ReduceOp::MIN: s.op = ncclMin; break;
    case c10d::ReduceOp::MAX: s.op = ncclMax; break;
    default: refuse(what, op, t, "unknown reduce op");
  }
  if (auto nt = ncclType(t)) {
    s.type = *nt;
    return s;
  }
  if (gatherableInteger(t)) {
    s.path = ReduceSpec::Path::Gathered;
    return s;
  }
  refuse(what, op, t, "NCCL has no element type for it");
}

at::Tensor reduceStacked(const at::Tensor& stacked, RedOp op, int nranks) {
  const auto dtype = stacked.scalar_type();
  // ATen has few kernels for uint16; int64 holds every value, and wrapping
  // int64 arithmetic agrees with uint16's modulo 2^16.
  if (dtype == at::kUInt16) return reduceStacked(stacked.to(at::kLong), op, nranks).to(dtype);
  switch (op) {
    case c10d::ReduceOp::SUM: return stacked.sum(0, false, dtype);
    case c10d::ReduceOp::AVG:
      return at::div(stacked.sum(0, false, at::kLong), nranks, "trunc").to(dtype);
    case c10d::ReduceOp::PRODUCT: return stacked.prod(0, false, dtype);
    case c10d::ReduceOp::MIN: return std::get<0>(stacked.min(0));
    case c10d::ReduceOp::MAX: return std::get<0>(stacked.max(0));
    default: break;
  }
  at::Tensor acc = stacked[0].clone();
  for (int64_t i = 1; i < stacked.size(0); ++i) {
    if (op == c10d::ReduceOp::BAND) acc.bitwise_and_(stacked[i]);
    else if (op == c10d::ReduceOp::BOR) acc.bitwise_or_(stacked[i]);
    else if (op == c10d::ReduceOp::BXOR) acc.bitwise_xor_(stacked[i]);
    else TORCH_CHECK(false, "braid: no local reduction for ReduceOp.", reduceOpName(op));
  }
  return acc;
}

void encodeScalar(double v, ncclDataType_t type, uint8_t out[8]) {
  std::memset(out, 0, 8);
  auto put = [&](auto x) { std::memcpy(out, &x, sizeof(x)); };
  switch (type) {
    case ncclFloat16: put(c10::Half(static_cast<float>(v))); break;
    case ncclBfloat16: put(c10::BFloat16(static_cast<float>(v))); break;
    case ncclFloat32: put(static_cast<float>(v)); break;
    case ncclFloat64: put(v); break;
    case ncclFloat8e4m3: put(c10::Float8_e4m3fn(static_cast<float>(v))); break;
    case ncclFloat8e5m2: put(c10::Float8_e5m2(static_cast<float>(v))); break;
    default: TORCH_CHECK(false, "braid: PREMUL_SUM scalar of NCCL type ", static_cast<int>(type));
  }
}

}  // namespace braid_torch
