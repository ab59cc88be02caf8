// Operations that reduce: allreduce (single and coalesced), reduce,
// reduce_scatter (list, tensor, coalesced), and barrier.
#include "backend.h"
#include "braid_api.h"
#include "tensor_util.h"
#include "types.h"

namespace braid_torch {

namespace {

// A PreMulSum operator, destroyed when the operation that used it is released
// (after its NCCL group ended).
struct PreMulSumOp {
  ncclRedOp_t op = ncclSum;
  ncclComm_t comm = nullptr;
  ~PreMulSumOp() {
    if (comm != nullptr) (void)braid().redOpDestroy(op, comm);
  }
};

// The reduction of `t` with its PREMUL_SUM factor resolved: a host factor is
// read now, a CUDA one is converted to the element type and read by the device.
ReduceSpec planFor(const c10d::ReduceOp& op, const at::Tensor& t, const char* what) {
  ReduceSpec spec = reduceSpecFor(op, t.scalar_type(), what);
  if (spec.factorTensor.defined()) {
    if (spec.factorTensor.is_cuda() && t.is_cuda()) {
      auto realType = at::isComplexType(t.scalar_type()) ? c10::toRealValueType(t.scalar_type()) : t.scalar_type();
      spec.factorTensor = spec.factorTensor.to(t.device(), realType).contiguous();
    } else {
      spec.factor = spec.factorTensor.item<double>();
      spec.factorTensor = at::Tensor();
    }
  }
  return spec;
}

// The NCCL operator for `spec`; PREMUL_SUM creates one held by `holder`.
ncclRedOp_t ncclOp(const ReduceSpec& spec, const IssueContext& ic, const std::shared_ptr<PreMulSumOp>& holder) {
  if (!spec.preMul) return spec.op;
  ncclRedOp_t op;
  if (spec.factorTensor.defined()) {
    ic.check(braid().redOpCreatePreMulSum(&op, spec.factorTensor.data_ptr(), spec.type, ncclScalarDevice, ic.comm),
             "ncclRedOpCreatePreMulSum");
  } else {
    uint8_t scalar[8];
    encodeScalar(spec.factor, spec.type, scalar);
    ic.check(braid().redOpCreatePreMulSum(&op, scalar, spec.type, ncclScalarHostImmediate, ic.comm),
             "ncclRedOpCreatePreMulSum");
  }
  holder->op = op;
  holder->comm = ic.comm;
  return op;
}

size_t reduceCount(const at::Tensor& t, const ReduceSpec& spec) {
  return static_cast<size_t>(t.numel()) * spec.elementsPerItem;
}

// Every rank's input, stacked as [nranks, numel] once the all-gather ran.
struct Gathered {
  Staged in;
  at::Tensor stacked;
};

Gathered gatherAll(const at::Tensor& input, int nranks, const char* what) {
  Gathered g{stageIn(input, what), at::empty({nranks, input.numel()}, input.options())};
  return g;
}

void issueGather(const Gathered& g, const IssueContext& ic) {
  ic.check(braid().allGather(g.in.data(), g.stacked.data_ptr(), byteSize(g.in.flat), ncclUint8, ic.comm, ic.stream),
           "ncclAllGather");
}

// The gathered path: every rank's tensor is all-gathered and reduced with ATen;
// `keep` says whether this rank takes the result.
Part gatheredReducePart(const at::Tensor& t, const ReduceSpec& spec, int nranks, bool keep, const char* what) {
  auto g = std::make_shared<Gathered>(gatherAll(t, nranks, what));
  Part part;
  part.tensors = {t, g->in.flat, g->stacked};
  part.issue = [g](const IssueContext& ic) { issueGather(*g, ic); };
  part.finish = [g, t, spec, nranks, keep] {
    if (keep) t.copy_(reduceStacked(g->stacked, spec.torchOp, nranks).view(t.sizes()));
  };
  return part;
}

Part allreducePart(const at::Tensor& t, const c10d::ReduceOp& op, int nranks, const char* what) {
  checkDense(t, what);
  ReduceSpec spec = planFor(op, t, what);
  if (spec.path == ReduceSpec::Path::Gathered) return gatheredReducePart(t, spec, nranks, true, what);
  Part part;
  Staged buf = stageInOut(t, what);
  auto holder = std::make_shared<PreMulSumOp>();
  part.tensors = {t, buf.flat, spec.factorTensor};
  part.issue = [buf, spec, holder](const IssueContext& ic) {
    ic.check(braid().allReduce(buf.data(), buf.data(), reduceCount(buf.flat, spec), spec.type,
                               ncclOp(spec, ic, holder), ic.comm, ic.stream),
             "ncclAllReduce");
  };
  part.finish = [buf] { buf.writeBack(); };
  return part;
}

Part reducePart(const at::Tensor& t, const c10d::ReduceOp& op, int root, int rank, int nranks, const char* what) {
  ReduceSpec spec = planFor(op, t, what);
  if (spec.path == ReduceSpec::Path::Gathered) return gatheredReducePart(t, spec, nranks, rank == root, what);
  Part part;
  Staged buf = stageInOut(t, what);
  auto holder = std::make_shared<PreMulSumOp>();
  part.tensors = {t, buf.flat, spec.factorTensor};
  part.issue = [buf, spec, holder, root](const IssueContext& ic) {
    ic.check(braid().reduce(buf.data(), buf.data(), reduceCount(buf.flat, spec), spec.type, ncclOp(spec, ic, holder),
                            root, ic.comm, ic.stream),
             "ncclReduce");
  };
  part.finish = [buf, rank, root] {
    if (rank == root) buf.writeBack();
  };
  return part;
}

// `input` holds nranks blocks of output.numel() elements, block r for rank r.
Part reduceScatterPart(const at::Tensor& output, const at::Tensor& input, const c10d::ReduceOp& op, int rank,
                       int nranks, const char* what) {
  checkDense(output, what);
  checkDense(input, what);
  TORCH_CHECK(input.scalar_type() == output.scalar_type(), "braid: ", what, ": input is ", input.scalar_type(),
              " but output is ", output.scalar_type());
  TORCH_CHECK(input.numel() == output.numel() * nranks, "braid: ", what, ": input has ", input.numel(),
              " elements, expected ", nranks, " x ", output.numel());
  ReduceSpec spec = planFor(op, output, what);
  Part part;
  Staged out = stageOut(output, what);
  if (spec.path == ReduceSpec::Path::Gathered) {
    auto g = std::make_shared<Gathered>(gatherAll(input, nranks, what));
    part.tensors = {output, out.flat, g->in.flat, g->stacked};
    part.issue = [g](const IssueContext& ic) { issueGather(*g, ic); };
    part.finish = [g, out, spec, nranks, rank] {
      const int64_t m = out.flat.numel();
      at::Tensor mine = g->stacked.narrow(1, rank * m, m);
      out.flat.copy_(reduceStacked(mine, spec.torchOp, nranks).view(out.flat.sizes()));
      out.writeBack();
    };
    return part;
  }
  Staged in = stageIn(input, what);
  auto holder = std::make_shared<PreMulSumOp>();
  part.tensors = {output, out.flat, in.flat, spec.factorTensor};
  part.issue = [in, out, spec, holder](const IssueContext& ic) {
    ic.check(braid().reduceScatter(in.data(), out.data(), reduceCount(out.flat, spec), spec.type,
                                   ncclOp(spec, ic, holder), ic.comm, ic.stream),
             "ncclReduceScatter");
  };
  part.finish = [out] { out.writeBack(); };
  return part;
}

}  // namespace

// A sparse (COO) sum as Gloo does it: every rank's non-zeros gathered (their
// counts first, then indices and values, one broadcast per rank as their
// sizes differ), summed by coalescing, and written into the tensor. The steps
// depend on each other's sizes, so it completes before it returns.
c10::intrusive_ptr<c10d::Work> BraidBackend::allreduceSparse(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  TORCH_CHECK(tensors.size() == 1, "braid: allreduce takes one tensor per process, got ", tensors.size());
  at::Tensor& t = tensors[0];
  TORCH_CHECK(t.layout() == at::kSparse, "braid: sparse allreduce supports COO sparse tensors only, got ", t.layout());
  TORCH_CHECK(t.device().is_cpu(), "braid: sparse allreduce supports CPU tensors only (as Gloo without CUDA)");
  TORCH_CHECK(opts.reduceOp == c10d::ReduceOp::SUM, "braid: sparse allreduce supports SUM only (as Gloo)");
  const at::Tensor input = t.coalesce();
  const at::Tensor indices = input._indices().contiguous();  // [sparse dims, nnz]
  const at::Tensor values = input._values().contiguous();    // [nnz, dense dims...]
  std::vector<at::Tensor> nnzIn = {at::full({1}, indices.size(1), at::kLong)};
  std::vector<std::vector<at::Tensor>> nnzOut(1);
  for (int r = 0; r < size_; ++r) nnzOut[0].push_back(at::empty({1}, at::kLong));
  allgather(nnzOut, nnzIn, c10d::AllgatherOptions())->wait();
  std::vector<std::vector<at::Tensor>> indexOut(1), valueOut(1);
  for (int r = 0; r < size_; ++r) {
    const int64_t n = nnzOut[0][r].item<int64_t>();
    indexOut[0].push_back(at::empty({indices.size(0), n}, indices.options()));
    std::vector<int64_t> shape = values.sizes().vec();
    shape[0] = n;
    valueOut[0].push_back(at::empty(shape, values.options()));
  }
  std::vector<at::Tensor> indexIn = {indices}, valueIn = {values};
  allgather(indexOut, indexIn, c10d::AllgatherOptions())->wait();
  allgather(valueOut, valueIn, c10d::AllgatherOptions())->wait();
  const at::Tensor sum =
      at::sparse_coo_tensor(at::cat(indexOut[0], 1), at::cat(valueOut[0], 0), input.sizes(), input.options())
          .coalesce();
  t.copy_(sum);
  // A finished work whose value is the tensor (an operation with no part).
  return submit(combine(c10d::OpType::ALLREDUCE, "allreduce", {}, tensors), false);
}

c10::intrusive_ptr<c10d::Work> BraidBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                       const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].defined() && tensors[0].layout() == at::kSparse)
    return allreduceSparse(tensors, opts);
  const at::Tensor& t = single(tensors, "allreduce");
  return submit(combine(c10d::OpType::ALLREDUCE, "allreduce", {allreducePart(t, opts.reduceOp, size_, "allreduce")},
                        tensors), opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> BraidBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                 const c10d::AllreduceCoalescedOptions& opts) {
  std::vector<Part> parts;
  for (const at::Tensor& t : tensors) parts.push_back(allreducePart(t, opts.reduceOp, size_, "allreduce_coalesced"));
  return submit(combine(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", std::move(parts), tensors),
                opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> BraidBackend::reduce(std::vector<at::Tensor>& tensors,
                                                    const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "braid: reduce supports rootTensor 0 only");
  TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < size_, "braid: reduce root ", opts.rootRank, " out of range");
  const int root = static_cast<int>(opts.rootRank);
  return submit(combine(c10d::OpType::REDUCE, "reduce", {reducePart(t, opts.reduceOp, root, rank_, size_, "reduce")},
                        tensors), opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> BraidBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                            std::vector<std::vector<at::Tensor>>& inputs,
                                                            const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "braid: reduce_scatter takes one input list per process, got ", inputs.size());
  TORCH_CHECK(static_cast<int>(inputs[0].size()) == size_, "braid: reduce_scatter needs ", size_,
              " input tensors, got ", inputs[0].size());
  std::vector<at::Tensor> flat;
  for (const at::Tensor& in : inputs[0]) {
    checkDense(in, "reduce_scatter");
    TORCH_CHECK(in.numel() == out.numel() && in.scalar_type() == out.scalar_type(),
                "braid: reduce_scatter inputs must match the output's size and dtype");
    flat.push_back(in.reshape({-1}));
  }
  at::Tensor joined = at::cat(flat);
  return submit(combine(c10d::OpType::REDUCE_SCATTER, "reduce_scatter",
                        {reduceScatterPart(out, joined, opts.reduceOp, rank_, size_, "reduce_scatter")}, outputs),
                opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> BraidBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::ReduceScatterOptions& opts) {
  return submit(combine(c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor",
                        {reduceScatterPart(output, input, opts.reduceOp, rank_, size_, "reduce_scatter_tensor")},
                        {output}), opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> BraidBackend::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "braid: reduce_scatter_tensor_coalesced got ", outputs.size(),
              " outputs and ", inputs.size(), " inputs");
  std::vector<Part> parts;
  for (size_t i = 0; i < outputs.size(); ++i)
    parts.push_back(reduceScatterPart(outputs[i], inputs[i], opts.reduceOp, rank_, size_,
                                      "reduce_scatter_tensor_coalesced"));
  return submit(combine(c10d::OpType::COALESCED, "reduce_scatter_tensor_coalesced", std::move(parts), outputs),
                opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> BraidBackend::barrier(const c10d::BarrierOptions& opts) {
  // Host memory whatever opts.device says: the worker runs operations in order,
  // so the barrier completes after every operation issued before it.
  at::Tensor token = at::zeros({1}, at::kByte);
  Part part;
  part.tensors = {token};
  part.issue = [token](const IssueContext& ic) {
    ic.check(braid().allReduce(token.data_ptr(), token.data_ptr(), 1, ncclUint8, ncclSum, ic.comm, nullptr),
             "ncclAllReduce");
  };
  return submit(combine(c10d::OpType::BARRIER, "barrier", {part}, {token}), opts.asyncOp);
}

}  // namespace braid_torch
