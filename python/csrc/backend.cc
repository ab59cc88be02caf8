#include "backend.h"

#include <c10/util/Exception.h>

#include <sstream>

#include "bootstrap.h"
#include "braid_api.h"
#include "gil.h"
#include "tensor_util.h"

namespace braid_torch {

namespace {

// Closes an NCCL group on every path, so that an exception thrown between
// ncclGroupStart and ncclGroupEnd leaves this thread with no open group.
class GroupScope {
 public:
  explicit GroupScope(const IssueContext& ctx) : ctx_(ctx) {
    ctx_.check(braid().groupStart(), "ncclGroupStart");
    open_ = true;
  }
  ~GroupScope() {
    if (open_) (void)braid().groupEnd();
  }
  void close() {
    open_ = false;
    ctx_.check(braid().groupEnd(), "ncclGroupEnd");
  }

 private:
  const IssueContext& ctx_;
  bool open_ = false;
};

std::string messageOf(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const c10::Error& err) {
    return err.what_without_backtrace();
  } catch (const std::exception& err) {
    return err.what();
  } catch (...) {
    return "unknown exception";
  }
}

std::exception_ptr distError(const std::string& message) {
  return std::make_exception_ptr(c10::DistBackendError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                                       message));
}

std::string formatTimeout(std::chrono::milliseconds t) {
  std::ostringstream s;
  s << t.count() / 1000.0 << " s";
  return s.str();
}

}  // namespace

void IssueContext::check(ncclResult_t r, const char* call) const {
  if (r == ncclSuccess) return;
  const BraidApi& api = braid();
  TORCH_CHECK(false, call, " returned ", api.getErrorString(r), ": ", api.getLastError(comm));
}

CommContext::~CommContext() {
  if (comm != nullptr) (void)braid().commDestroy(comm);
}

BraidBackend::BraidBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                           std::chrono::milliseconds timeout)
    : c10d::Backend(rank, size), ctx_(std::make_shared<CommContext>()) {
  ctx_->rank = rank;
  ctx_->size = size;
  ctx_->timeout = timeout;
  ctx_->comm = createCommunicator(store, rank, size, timeout);
  anySource_ = std::make_shared<AnySourceLedger>(store, rank, size);
  init();
}

BraidBackend::~BraidBackend() {
  withoutGil([this] { worker_.stop(); });
}

c10::intrusive_ptr<c10d::Backend::Options> BraidBackend::getBackendOptions() {
  return c10::make_intrusive<Options>("braid", ctx_->timeout);
}

c10d::ErrorType BraidBackend::getError() {
  std::lock_guard<std::mutex> lock(ctx_->mutex);
  if (ctx_->failure.empty()) return c10d::ErrorType::SUCCESS;
  return ctx_->failure.find("timed out") != std::string::npos ? c10d::ErrorType::TIMEOUT
                                                               : c10d::ErrorType::COMM_ERROR;
}

std::string BraidBackend::describe(const std::string& name, uint64_t seq) const {
  std::string group = getGroupDesc();
  if (group.empty()) group = getGroupUid();
  std::ostringstream s;
  s << name << " #" << seq << " on process group '" << (group.empty() ? "?" : group) << "' (rank "
    << ctx_->rank << " of " << ctx_->size << ")";
  return s.str();
}

uint64_t BraidBackend::getSequenceNumberForGroup() {
  std::lock_guard<std::mutex> lock(submitMutex_);
  return seq_;
}

c10::intrusive_ptr<c10d::Work> BraidBackend::submit(OpSpec spec, bool asyncOp) {
  Op op;
  op.device = DeviceSync::capture(spec.tensors, streams_, spec.name.c_str());
  auto ready = std::make_shared<Batch>();
  bool inline_ = false;
  {
    std::lock_guard<std::mutex> lock(submitMutex_);
    op.work = c10::make_intrusive<BraidWork>(ctx_->rank, spec.type, describe(spec.name, ++seq_), spec.results,
                                             op.device);
    if (spec.source) op.work->setSource(spec.source);
    op.spec = std::move(spec);
    if (coalescing_) {
      open_->ops.push_back(op);
      return op.work;
    }
    ready->ops.push_back(op);
    // Counted under submitMutex_: seeing zero here means no earlier batch is
    // queued or running, so running this one now keeps the issue order.
    inline_ = !asyncOp && !op.device && ctx_->inFlight.load() == 0 && !worker_.onWorkerThread();
    ctx_->inFlight.fetch_add(1);
  }
  if (inline_) runInOrder(*ctx_, *ready);
  else post(ready);
  return op.work;
}

void BraidBackend::startCoalescing() {
  std::lock_guard<std::mutex> lock(submitMutex_);
  TORCH_CHECK(!coalescing_, "braid: startCoalescing called twice without endCoalescing");
  coalescing_ = true;
  open_ = std::make_shared<Batch>();
}

c10::intrusive_ptr<c10d::Work> BraidBackend::endCoalescing() {
  std::shared_ptr<Batch> batch;
  {
    std::lock_guard<std::mutex> lock(submitMutex_);
    TORCH_CHECK(coalescing_, "braid: endCoalescing called without startCoalescing");
    coalescing_ = false;
    batch = std::move(open_);
    std::vector<at::Tensor> results;
    std::shared_ptr<DeviceSync> device;
    for (const Op& op : batch->ops) {
      results.insert(results.end(), op.spec.results.begin(), op.spec.results.end());
      if (op.device) device = op.device;
    }
    batch->coalesced = c10::make_intrusive<BraidWork>(
        ctx_->rank, c10d::OpType::COALESCED,
        describe("coalesced(" + std::to_string(batch->ops.size()) + " ops)", ++seq_), results, device);
    ctx_->inFlight.fetch_add(1);
  }
  post(batch);
  return batch->coalesced;
}

void BraidBackend::post(const std::shared_ptr<Batch>& batch) {
  // The task holds the context, not the backend: it may outlive a backend
  // whose last reference is dropped on the worker thread.
  std::shared_ptr<CommContext> ctx = ctx_;
  bool queued = worker_.post([ctx, batch] { runInOrder(*ctx, *batch); });
  if (!queued) {
    ctx->inFlight.fetch_sub(1);
    auto error = distError("braid: the process group was shut down; no operation can run on it");
    for (Op& op : batch->ops) op.work->complete(error);
    if (batch->coalesced) batch->coalesced->complete(error);
  }
}

void BraidBackend::runInOrder(CommContext& ctx, Batch& batch) {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(ctx.execMutex);
    error = runBatch(ctx, batch);
  }
  ctx.inFlight.fetch_sub(1);
  // Completion runs future callbacks: outside the lock and the count, so a
  // callback that issues and waits on another operation cannot deadlock.
  for (Op& op : batch.ops) op.work->complete(error);
  if (batch.coalesced) batch.coalesced->complete(error);
}

std::exception_ptr BraidBackend::runBatch(CommContext& ctx, Batch& batch) {
  std::string first = batch.ops.empty() ? std::string("empty coalesced batch")
                                         : batch.ops.front().work->description();
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(ctx.mutex);
    if (ctx.aborted) error = distError("braid: " + first + " was not run: the process group was aborted");
    else if (!ctx.failure.empty())
      error = distError("braid: " + first + " was not run: an earlier operation of this process group failed: " +
                        ctx.failure);
  }
  if (!error && !batch.ops.empty()) {
    try {
      cudaStream_t stream = nullptr;
      for (Op& op : batch.ops)
        if (op.device) stream = op.device->begin();
      IssueContext ic{ctx.comm, stream, ctx.rank, ctx.size};
      {
        GroupScope group(ic);
        for (Op& op : batch.ops) op.spec.issue(ic);
        group.close();
      }
      for (Op& op : batch.ops) {
        if (op.spec.finish) {
          if (op.device) op.device->withStream(op.spec.finish);
          else op.spec.finish();
        }
        if (op.device) op.device->end(op.spec.tensors);
      }
    } catch (...) {
      std::string what;
      for (const Op& op : batch.ops) what += (what.empty() ? "" : ", ") + op.work->description();
      std::string msg = messageOf(std::current_exception());
      {
        std::lock_guard<std::mutex> lock(ctx.mutex);
        if (ctx.failure.empty()) ctx.failure = msg;
      }
      error = distError("braid: " + what + " failed: " + msg + " [process group timeout " +
                        formatTimeout(ctx.timeout) + "]");
    }
  }
  return error;
}

void BraidBackend::shutdown() {
  withoutGil([this] { worker_.stop(); });
}

void BraidBackend::abort() {
  {
    std::lock_guard<std::mutex> lock(ctx_->mutex);
    ctx_->aborted = true;
  }
  withoutGil([this] { worker_.stop(); });
}

void BraidBackend::setReproducible(bool on) {
  TORCH_CHECK(braid().commSetReproducible != nullptr,
              "braid: the loaded libbraid has no reproducible mode (braidCommSetReproducible); update it");
  configure("set_reproducible", [on](const IssueContext& ic) {
    ic.check(braid().commSetReproducible(ic.comm, on ? 1 : 0), "braidCommSetReproducible");
  });
}

void BraidBackend::setWireType(ncclDataType_t wire) {
  TORCH_CHECK(braid().commSetWireType != nullptr,
              "braid: the loaded libbraid has no wire types (braidCommSetWireType); update it");
  configure("set_wire_type", [wire](const IssueContext& ic) {
    ic.check(braid().commSetWireType(ic.comm, wire), "braidCommSetWireType");
  });
}

void BraidBackend::configure(const char* name, std::function<void(const IssueContext&)> issue) {
  Part part;
  part.issue = std::move(issue);
  c10::intrusive_ptr<c10d::Work> work = submit(combine(c10d::OpType::UNKNOWN, name, {part}, {}), false);
  work->wait();
}

c10::intrusive_ptr<c10d::Backend> createBraidBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                      int size, std::chrono::milliseconds timeout) {
  TORCH_CHECK(size >= 1 && rank >= 0 && rank < size, "braid: invalid rank ", rank, " of ", size);
  return c10::make_intrusive<BraidBackend>(store, rank, size, timeout);
}

}  // namespace braid_torch
