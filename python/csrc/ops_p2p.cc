// Point-to-point operations: all-to-all (equal and uneven splits, single tensor
// and list forms) as grouped sends and receives, send and recv.
#include <numeric>

#include "backend.h"
#include "braid_api.h"
#include "tensor_util.h"

namespace braid_torch {

namespace {

// Rows of dim 0 going to (or coming from) each rank, and their element offsets.
struct Splits {
  std::vector<int64_t> rows;
  std::vector<int64_t> offsets;  // in elements
  int64_t rowElems = 0;
};

Splits splitsFor(const at::Tensor& t, const std::vector<int64_t>& given, int nranks, const char* side) {
  TORCH_CHECK(t.dim() >= 1, "braid: alltoall_base needs tensors with at least one dimension");
  Splits s;
  const int64_t rows = t.size(0);
  s.rowElems = rows == 0 ? 0 : t.numel() / rows;
  if (given.empty()) {
    TORCH_CHECK(rows % nranks == 0, "braid: alltoall_base: the ", side, " has ", rows,
                " rows, not divisible by the group size ", nranks, "; pass split sizes");
    s.rows.assign(nranks, rows / nranks);
  } else {
    TORCH_CHECK(static_cast<int>(given.size()) == nranks, "braid: alltoall_base: ", given.size(), " ", side,
                " split sizes for a group of ", nranks);
    TORCH_CHECK(std::accumulate(given.begin(), given.end(), int64_t{0}) == rows, "braid: alltoall_base: the ",
                side, " split sizes do not add up to its ", rows, " rows");
    for (int64_t r : given) TORCH_CHECK(r >= 0, "braid: alltoall_base: negative split size");
    s.rows = given;
  }
  int64_t off = 0;
  for (int64_t r : s.rows) {
    s.offsets.push_back(off);
    off += r * s.rowElems;
  }
  return s;
}

const char* bytesAt(const Staged& s, int64_t elementOffset) {
  return static_cast<const char*>(s.data()) + elementOffset * s.flat.element_size();
}

}  // namespace

c10::intrusive_ptr<c10d::Work> BraidBackend::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                           std::vector<int64_t>& outputSplits,
                                                           std::vector<int64_t>& inputSplits,
                                                           const c10d::AllToAllOptions& opts) {
  checkDense(output, "alltoall_base");
  checkDense(input, "alltoall_base");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "braid: alltoall_base mixes ", input.scalar_type(),
              " and ", output.scalar_type());
  Splits in = splitsFor(input, inputSplits, size_, "input");
  Splits out = splitsFor(output, outputSplits, size_, "output");
  const int me = rank_;
  TORCH_CHECK(in.rows[me] * in.rowElems == out.rows[me] * out.rowElems, "braid: alltoall_base: this rank sends ",
              in.rows[me] * in.rowElems, " elements to itself but expects ", out.rows[me] * out.rowElems);
  Staged src = stageIn(input, "alltoall_base");
  Staged dst = stageOut(output, "alltoall_base");
  Part part;
  part.tensors = {output, dst.flat, src.flat};
  const size_t esize = input.element_size();
  part.issue = [src, dst, in, out, me, esize](const IssueContext& ic) {
    for (int p = 0; p < ic.size; ++p) {
      if (p == me) continue;
      const size_t sendBytes = in.rows[p] * in.rowElems * esize;
      const size_t recvBytes = out.rows[p] * out.rowElems * esize;
      if (sendBytes > 0)
        ic.check(braid().send(bytesAt(src, in.offsets[p]), sendBytes, ncclUint8, p, ic.comm, ic.stream), "ncclSend");
      if (recvBytes > 0)
        ic.check(braid().recv(const_cast<char*>(bytesAt(dst, out.offsets[p])), recvBytes, ncclUint8, p, ic.comm,
                              ic.stream),
                 "ncclRecv");
    }
  };
  part.finish = [src, dst, in, out, me] {
    const int64_t n = in.rows[me] * in.rowElems;
    if (n > 0)
      dst.flat.reshape({-1}).narrow(0, out.offsets[me], n).copy_(src.flat.reshape({-1}).narrow(0, in.offsets[me], n));
    dst.writeBack();
  };
  return submit(combine(c10d::OpType::ALLTOALL_BASE, "alltoall_base", {part}, {output}), opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> BraidBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_,
              "braid: alltoall needs ", size_, " input and output tensors, got ", inputs.size(), " and ",
              outputs.size());
  std::vector<Staged> ins, outs;
  Part part;
  for (int r = 0; r < size_; ++r) {
    TORCH_CHECK(inputs[r].scalar_type() == outputs[r].scalar_type(), "braid: alltoall mixes ",
                inputs[r].scalar_type(), " and ", outputs[r].scalar_type());
    ins.push_back(stageIn(inputs[r], "alltoall"));
    outs.push_back(stageOut(outputs[r], "alltoall"));
    part.tensors.insert(part.tensors.end(), {outputs[r], outs.back().flat, ins.back().flat});
  }
  const int me = rank_;
  TORCH_CHECK(inputs[me].numel() == outputs[me].numel(), "braid: alltoall: this rank's tensors to itself have ",
              inputs[me].numel(), " and ", outputs[me].numel(), " elements");
  part.issue = [ins, outs, me](const IssueContext& ic) {
    for (int p = 0; p < ic.size; ++p) {
      if (p == me) continue;
      if (byteSize(ins[p].flat) > 0)
        ic.check(braid().send(ins[p].data(), byteSize(ins[p].flat), ncclUint8, p, ic.comm, ic.stream), "ncclSend");
      if (byteSize(outs[p].flat) > 0)
        ic.check(braid().recv(outs[p].data(), byteSize(outs[p].flat), ncclUint8, p, ic.comm, ic.stream), "ncclRecv");
    }
  };
  part.finish = [ins, outs, me] {
    outs[me].flat.copy_(ins[me].flat.view(outs[me].flat.sizes()));
    for (const Staged& s : outs) s.writeBack();
  };
  return submit(combine(c10d::OpType::ALLTOALL, "alltoall", {part}, outputs), opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> BraidBackend::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  const at::Tensor& t = single(tensors, "send");
  TORCH_CHECK(dstRank >= 0 && dstRank < size_ && dstRank != rank_, "braid: send to rank ", dstRank,
              " from rank ", rank_, " in a group of ", size_);
  Staged in = stageIn(t, "send");
  Part part;
  part.tensors = {t, in.flat};
  part.issue = [in, dstRank](const IssueContext& ic) {
    ic.check(braid().send(in.data(), byteSize(in.flat), ncclUint8, dstRank, ic.comm, ic.stream), "ncclSend");
  };
  auto work = submit(combine(c10d::OpType::SEND, "send", {part}, tensors));
  anySource_->noteSend(dstRank);  // in issue order: submit() queued it
  return work;
}

c10::intrusive_ptr<c10d::Work> BraidBackend::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  const at::Tensor& t = single(tensors, "recv");
  TORCH_CHECK(srcRank >= 0 && srcRank < size_ && srcRank != rank_, "braid: recv from rank ", srcRank,
              " on rank ", rank_, " in a group of ", size_);
  return receive(t, c10d::OpType::RECV, "recv", [srcRank] { return srcRank; });
}

c10::intrusive_ptr<c10d::Work> BraidBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  const at::Tensor& t = single(tensors, "recv from any source");
  TORCH_CHECK(size_ > 1, "braid: recv from any source in a group of one rank: no rank can send");
  {
    std::lock_guard<std::mutex> lock(submitMutex_);
    TORCH_CHECK(!coalescing_, "braid: recv from any source inside a coalesced batch (batch_isend_irecv): the "
                              "batch's operations are issued together, before any source is known");
  }
  return receive(t, c10d::OpType::RECVANYSOURCE, "recvAnySource", [ledger = anySource_, ctx = ctx_] {
    return ledger->pickSource(ctx->timeout, [&ctx] {
      std::lock_guard<std::mutex> lock(ctx->mutex);
      return ctx->aborted;
    });
  });
}

c10::intrusive_ptr<c10d::Work> BraidBackend::receive(const at::Tensor& t, c10d::OpType type, const char* name,
                                                     std::function<int()> sourceOf) {
  Staged out = stageOut(t, name);
  auto source = std::make_shared<std::atomic<int>>(-1);
  Part part;
  part.tensors = {t, out.flat};
  part.issue = [out, source, sourceOf, ledger = anySource_](const IssueContext& ic) {
    const int src = sourceOf();
    ledger->noteReceive(src);
    ic.check(braid().recv(out.data(), byteSize(out.flat), ncclUint8, src, ic.comm, ic.stream), "ncclRecv");
    source->store(src);
  };
  part.finish = [out] { out.writeBack(); };
  OpSpec spec = combine(type, name, {part}, {t});
  spec.source = source;
  return submit(std::move(spec));
}

}  // namespace braid_torch
