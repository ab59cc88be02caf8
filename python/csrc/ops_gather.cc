// Operations that move data without reducing it: broadcast, allgather (list,
// tensor, coalesced), gather and scatter. All move bytes, so every dtype works.
#include "backend.h"
#include "braid_api.h"
#include "tensor_util.h"

namespace braid_torch {

namespace {

void checkSameType(const at::Tensor& a, const at::Tensor& b, const char* what) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "braid: ", what, " mixes ", a.scalar_type(), " and ",
              b.scalar_type(), " tensors");
}

void checkRoot(int64_t root, int size, const char* what) {
  TORCH_CHECK(root >= 0 && root < size, "braid: ", what, " root ", root, " is not a rank of this group of ", size);
}

Part allgatherTensorPart(const at::Tensor& output, const at::Tensor& input, int nranks, const char* what) {
  checkSameType(output, input, what);
  TORCH_CHECK(output.numel() == input.numel() * nranks, "braid: ", what, ": output has ", output.numel(),
              " elements, expected ", nranks, " x ", input.numel());
  Staged in = stageIn(input, what);
  Staged out = stageOut(output, what);
  Part part;
  part.tensors = {output, out.flat, in.flat};
  part.issue = [in, out](const IssueContext& ic) {
    ic.check(braid().allGather(in.data(), out.data(), byteSize(in.flat), ncclUint8, ic.comm, ic.stream),
             "ncclAllGather");
  };
  part.finish = [out] { out.writeBack(); };
  return part;
}

// Outputs of different sizes: every rank broadcasts its input in turn.
Part allgatherUnevenPart(const std::vector<at::Tensor>& outputs, const at::Tensor& input, int rank) {
  TORCH_CHECK(outputs[rank].numel() == input.numel(), "braid: allgather: output ", rank, " has ",
              outputs[rank].numel(), " elements but this rank's input has ", input.numel());
  Staged in = stageIn(input, "allgather");
  std::vector<Staged> outs;
  Part part;
  part.tensors = {in.flat};
  for (const at::Tensor& o : outputs) {
    outs.push_back(stageOut(o, "allgather"));
    part.tensors.push_back(o);
    part.tensors.push_back(outs.back().flat);
  }
  part.issue = [in, outs, rank](const IssueContext& ic) {
    for (int r = 0; r < ic.size; ++r) {
      const void* src = r == rank ? in.data() : outs[r].data();
      ic.check(braid().broadcast(src, outs[r].data(), byteSize(outs[r].flat), ncclUint8, r, ic.comm, ic.stream),
               "ncclBroadcast");
    }
  };
  part.finish = [outs] {
    for (const Staged& s : outs) s.writeBack();
  };
  return part;
}

// `input` of every rank into outs[rank]: one all-gather into a joined buffer
// split afterwards when every rank's share has one size, one broadcast per
// rank when they differ (Gloo refuses those).
Part allgatherListPart(const std::vector<at::Tensor>& outs, const at::Tensor& input, int rank, int size,
                       const char* what) {
  TORCH_CHECK(static_cast<int>(outs.size()) == size, "braid: ", what, " needs ", size, " output tensors, got ",
              outs.size());
  bool even = true;
  for (const at::Tensor& o : outs) {
    checkDense(o, what);
    checkSameType(o, input, what);
    even = even && o.numel() == input.numel();
  }
  if (!even) return allgatherUnevenPart(outs, input, rank);
  at::Tensor joined = at::empty({static_cast<int64_t>(size) * input.numel()}, input.options());
  Part part = allgatherTensorPart(joined, input, size, what);
  part.tensors.insert(part.tensors.end(), outs.begin(), outs.end());
  auto gatherJoined = part.finish;
  part.finish = [gatherJoined, joined, outs] {
    gatherJoined();
    const int64_t n = outs.empty() ? 0 : outs[0].numel();
    for (size_t r = 0; r < outs.size(); ++r)
      outs[r].copy_(joined.narrow(0, static_cast<int64_t>(r) * n, n).view(outs[r].sizes()));
  };
  return part;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> BraidBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                       const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  checkRoot(opts.rootRank, size_, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "braid: broadcast supports rootTensor 0 only");
  const int root = static_cast<int>(opts.rootRank);
  Staged buf = stageInOut(t, "broadcast");
  Part part;
  part.tensors = {t, buf.flat};
  part.issue = [buf, root](const IssueContext& ic) {
    ic.check(braid().broadcast(buf.data(), buf.data(), byteSize(buf.flat), ncclUint8, root, ic.comm, ic.stream),
             "ncclBroadcast");
  };
  const int rank = rank_;
  part.finish = [buf, rank, root] {
    if (rank != root) buf.writeBack();
  };
  return submit(combine(c10d::OpType::BROADCAST, "broadcast", {part}, tensors), opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> BraidBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                       std::vector<at::Tensor>& inputs,
                                                       const c10d::AllgatherOptions& opts) {
  const at::Tensor& input = single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "braid: allgather takes one output list per process, got ", outputs.size());
  const std::vector<at::Tensor>& outs = outputs[0];
  std::vector<at::Tensor> results(outs.begin(), outs.end());
  return submit(combine(c10d::OpType::ALLGATHER, "allgather", {allgatherListPart(outs, input, rank_, size_, "allgather")},
                        results),
                opts.asyncOp);
}

// outputLists[r][i] gets rank r's inputs[i] (PyTorch's all_gather_coalesced):
// one all-gather per input, in one group.
c10::intrusive_ptr<c10d::Work> BraidBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(static_cast<int>(outputLists.size()) == size_, "braid: allgather_coalesced needs ", size_,
              " output lists (one per rank), got ", outputLists.size());
  std::vector<Part> parts;
  std::vector<at::Tensor> results;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkDense(inputs[i], "allgather_coalesced");
    std::vector<at::Tensor> outs;
    for (const std::vector<at::Tensor>& list : outputLists) {
      TORCH_CHECK(list.size() == inputs.size(), "braid: allgather_coalesced: an output list has ", list.size(),
                  " tensors for ", inputs.size(), " inputs");
      outs.push_back(list[i]);
    }
    parts.push_back(allgatherListPart(outs, inputs[i], rank_, size_, "allgather_coalesced"));
    results.insert(results.end(), outs.begin(), outs.end());
  }
  return submit(combine(c10d::OpType::ALLGATHER_COALESCED, "allgather_coalesced", std::move(parts), results),
                opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> BraidBackend::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                             const c10d::AllgatherOptions& opts) {
  checkDense(output, "allgather_into_tensor");
  checkDense(input, "allgather_into_tensor");
  return submit(combine(c10d::OpType::_ALLGATHER_BASE, "allgather_into_tensor",
                        {allgatherTensorPart(output, input, size_, "allgather_into_tensor")}, {output}), opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> BraidBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                             std::vector<at::Tensor>& inputs,
                                                                             const c10d::AllgatherOptions& opts) {
  TORCH_CHECK(outputs.size() == inputs.size(), "braid: allgather_into_tensor_coalesced got ", outputs.size(),
              " outputs and ", inputs.size(), " inputs");
  std::vector<Part> parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkDense(outputs[i], "allgather_into_tensor_coalesced");
    checkDense(inputs[i], "allgather_into_tensor_coalesced");
    parts.push_back(allgatherTensorPart(outputs[i], inputs[i], size_, "allgather_into_tensor_coalesced"));
  }
  return submit(combine(c10d::OpType::COALESCED, "allgather_into_tensor_coalesced", std::move(parts), outputs),
                opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> BraidBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                    std::vector<at::Tensor>& inputs,
                                                    const c10d::GatherOptions& opts) {
  const at::Tensor& input = single(inputs, "gather");
  checkRoot(opts.rootRank, size_, "gather");
  const int root = static_cast<int>(opts.rootRank);
  Staged in = stageIn(input, "gather");
  Part part;
  part.tensors = {input, in.flat};
  std::vector<at::Tensor> results;
  if (rank_ != root) {
    TORCH_CHECK(outputs.empty() || outputs[0].empty(), "braid: gather: only the root (rank ", root,
                ") passes a gather list");
    part.issue = [in, root](const IssueContext& ic) {
      ic.check(braid().send(in.data(), byteSize(in.flat), ncclUint8, root, ic.comm, ic.stream), "ncclSend");
    };
    return submit(combine(c10d::OpType::GATHER, "gather", {part}, {}), opts.asyncOp);
  }
  TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, "braid: gather: the root needs ",
              size_, " output tensors");
  std::vector<Staged> outs;
  for (const at::Tensor& o : outputs[0]) {
    checkSameType(o, input, "gather");
    TORCH_CHECK(o.numel() == input.numel(), "braid: gather: outputs must have the input's ", input.numel(),
                " elements, one has ", o.numel());
    outs.push_back(stageOut(o, "gather"));
    part.tensors.push_back(o);
    part.tensors.push_back(outs.back().flat);
    results.push_back(o);
  }
  part.issue = [in, outs, root](const IssueContext& ic) {
    for (int r = 0; r < ic.size; ++r)
      if (r != root)
        ic.check(braid().recv(outs[r].data(), byteSize(outs[r].flat), ncclUint8, r, ic.comm, ic.stream), "ncclRecv");
  };
  part.finish = [in, outs, root] {
    outs[root].flat.copy_(in.flat.view(outs[root].flat.sizes()));
    for (const Staged& s : outs) s.writeBack();
  };
  return submit(combine(c10d::OpType::GATHER, "gather", {part}, results), opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> BraidBackend::scatter(std::vector<at::Tensor>& outputs,
                                                     std::vector<std::vector<at::Tensor>>& inputs,
                                                     const c10d::ScatterOptions& opts) {
  const at::Tensor& output = single(outputs, "scatter");
  checkRoot(opts.rootRank, size_, "scatter");
  const int root = static_cast<int>(opts.rootRank);
  Staged out = stageOut(output, "scatter");
  Part part;
  part.tensors = {output, out.flat};
  if (rank_ != root) {
    TORCH_CHECK(inputs.empty() || inputs[0].empty(), "braid: scatter: only the root (rank ", root,
                ") passes a scatter list");
    part.issue = [out, root](const IssueContext& ic) {
      ic.check(braid().recv(out.data(), byteSize(out.flat), ncclUint8, root, ic.comm, ic.stream), "ncclRecv");
    };
    part.finish = [out] { out.writeBack(); };
    return submit(combine(c10d::OpType::SCATTER, "scatter", {part}, outputs), opts.asyncOp);
  }
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, "braid: scatter: the root needs ",
              size_, " input tensors");
  std::vector<Staged> ins;
  for (const at::Tensor& i : inputs[0]) {
    checkSameType(i, output, "scatter");
    TORCH_CHECK(i.numel() == output.numel(), "braid: scatter: inputs must have the output's ", output.numel(),
                " elements, one has ", i.numel());
    ins.push_back(stageIn(i, "scatter"));
    part.tensors.push_back(i);
    part.tensors.push_back(ins.back().flat);
  }
  part.issue = [ins, root](const IssueContext& ic) {
    for (int r = 0; r < ic.size; ++r)
      if (r != root)
        ic.check(braid().send(ins[r].data(), byteSize(ins[r].flat), ncclUint8, r, ic.comm, ic.stream), "ncclSend");
  };
  part.finish = [ins, out, root] {
    out.flat.copy_(ins[root].flat.view(out.flat.sizes()));
    out.writeBack();
  };
  return submit(combine(c10d::OpType::SCATTER, "scatter", {part}, outputs), opts.asyncOp);
}

}  // namespace braid_torch
