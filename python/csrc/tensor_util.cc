#include "tensor_util.h"

namespace braid_torch {

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "braid: ", what, " takes one tensor per process, got ", tensors.size());
  checkDense(tensors[0], what);
  return tensors[0];
}

void checkDense(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined(), "braid: ", what, " got an undefined tensor");
  TORCH_CHECK(t.layout() == at::kStrided, "braid: ", what, " supports dense (strided) tensors only, got ",
              t.layout(), "; use the gloo backend for sparse tensors");
}

size_t byteSize(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

Staged stageIn(const at::Tensor& t, const char* what) {
  checkDense(t, what);
  Staged s{t, t, false};
  if (!t.is_contiguous()) {
    s.flat = t.contiguous();
    s.copied = true;
  }
  return s;
}

Staged stageOut(const at::Tensor& t, const char* what) {
  checkDense(t, what);
  Staged s{t, t, false};
  if (!t.is_contiguous()) {
    s.flat = at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::Contiguous));
    s.copied = true;
  }
  return s;
}

Staged stageInOut(const at::Tensor& t, const char* what) { return stageIn(t, what); }

OpSpec combine(c10d::OpType type, std::string name, std::vector<Part> parts, std::vector<at::Tensor> results) {
  OpSpec spec;
  spec.type = type;
  spec.name = std::move(name);
  spec.results = std::move(results);
  for (const Part& p : parts) spec.tensors.insert(spec.tensors.end(), p.tensors.begin(), p.tensors.end());
  auto shared = std::make_shared<std::vector<Part>>(std::move(parts));
  spec.issue = [shared](const IssueContext& ic) {
    for (const Part& p : *shared) p.issue(ic);
  };
  spec.finish = [shared] {
    for (const Part& p : *shared)
      if (p.finish) p.finish();
  };
  return spec;
}

}  // namespace braid_torch
