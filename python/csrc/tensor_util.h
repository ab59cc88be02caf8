// Checks and staging shared by the operations.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>
#include <vector>

#include "op.h"

namespace braid_torch {

// Exactly one tensor, as PyTorch passes since one process drives one device.
const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* what);

// Refuses undefined and sparse tensors, naming the operation.
void checkDense(const at::Tensor& t, const char* what);

size_t byteSize(const at::Tensor& t);

// A tensor as one contiguous buffer NCCL can address. When the user's tensor
// is not contiguous, `flat` is a contiguous copy (or scratch for pure outputs)
// and writeBack() copies the result into the user's tensor.
struct Staged {
  at::Tensor user;
  at::Tensor flat;
  bool copied = false;
  void* data() const { return flat.data_ptr(); }
  void writeBack() const {
    if (copied) user.copy_(flat.view(user.sizes()));
  }
};
Staged stageIn(const at::Tensor& t, const char* what);
Staged stageOut(const at::Tensor& t, const char* what);
Staged stageInOut(const at::Tensor& t, const char* what);

// A piece of an operation: coalesced calls combine several parts into one Op.
struct Part {
  std::function<void(const IssueContext&)> issue;
  std::function<void()> finish;  // may be empty
  std::vector<at::Tensor> tensors;
};

// One OpSpec running all parts in order.
OpSpec combine(c10d::OpType type, std::string name, std::vector<Part> parts, std::vector<at::Tensor> results);

}  // namespace braid_torch
