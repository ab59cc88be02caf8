#include "transports/inproc/inproc_transport.h"

#include <nccl.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

#include "base/log.h"
#include "base/aligned_buffer.h"
#include "base/blob.h"
#include "transports/common/connect_util.h"
#include "transports/common/fifo.h"

namespace braid {
namespace {

constexpr uint64_t kBlobMagic = 0x434f52504e494442ull;  // "BDINPROC"

// The heap region behind one connection, owned jointly by both sides.
struct InprocFifo {
  AlignedBuffer memory;
  fifo::Region region;
};

// Maps the ids carried in blobs to live FIFOs. A blob is only bytes, so the
// sender must not dereference a pointer from it: an endpoint destroyed early
// (abort, failed init) would leave it dangling. Lookups through weak_ptr turn
// that into an error.
class Registry {
 public:
  uint64_t add(const std::shared_ptr<InprocFifo>& f) {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t id = ++lastId_;
    fifos_[id] = f;
    return id;
  }
  void remove(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    fifos_.erase(id);
  }
  std::shared_ptr<InprocFifo> find(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = fifos_.find(id);
    return it == fifos_.end() ? nullptr : it->second.lock();
  }

 private:
  std::mutex mu_;
  uint64_t lastId_ = 0;
  std::unordered_map<uint64_t, std::weak_ptr<InprocFifo>> fifos_;
};

Registry& registry() {
  // Deliberately never destroyed: endpoints owned by static objects may be
  // torn down after this function's statics at exit.
  static Registry* const r = new Registry();
  return *r;
}

class InprocSend final : public SendConnection {
 public:
  explicit InprocSend(std::shared_ptr<InprocFifo> f) : fifo_(std::move(f)), sender_(fifo_->region) {}
  void* acquire() override { return sender_.acquire(); }
  void post(size_t bytes) override { sender_.post(bytes); }
  Result progress() override { return Result::success(); }
  bool flushed() const override { return true; }

 private:
  std::shared_ptr<InprocFifo> fifo_;
  fifo::Sender sender_;
};

class InprocRecv final : public RecvConnection {
 public:
  InprocRecv(std::shared_ptr<InprocFifo> f, std::string peer)
      : fifo_(std::move(f)), receiver_(fifo_->region), peer_(std::move(peer)) {}
  const void* peek(size_t* bytes) override { return receiver_.peek(bytes); }
  void release() override { receiver_.release(); }
  Result progress() override {
    if (receiver_.badSize())
      return fail(ncclInternalError, "in-process FIFO from %s holds a slot of %llu bytes, more "
                  "than the slot size %zu: memory corruption",
                  peer_.c_str(), static_cast<unsigned long long>(receiver_.badSize()),
                  fifo_->region.layout().slotBytes);
    return Result::success();
  }

 private:
  std::shared_ptr<InprocFifo> fifo_;
  fifo::Receiver receiver_;
  std::string peer_;
};

class InprocEndpoint final : public RecvEndpoint {
 public:
  InprocEndpoint(const ConnectRequest& req, std::shared_ptr<InprocFifo> f)
      : req_(req), fifo_(std::move(f)), id_(registry().add(fifo_)) {
    BlobWriter(&blob_)
        .put(kBlobMagic)
        .put(req.self.processId)
        .put(id_)
        .put(static_cast<uint64_t>(req.slotBytes))
        .put(static_cast<int32_t>(req.nslots));
  }
  ~InprocEndpoint() override { registry().remove(id_); }

  const Blob& blob() const override { return blob_; }

  Result accept(std::unique_ptr<RecvConnection>* out) override {
    const fifo::Control* ctl = fifo_->region.control();
    std::string what = describePeer(req_.peer) + " to attach to the in-process FIFO of channel " +
                       std::to_string(req_.channel);
    BRAID_TRY(waitUntil(req_, what, [ctl] {
      return ctl->attached.load(std::memory_order_acquire) != 0;
    }));
    *out = std::make_unique<InprocRecv>(fifo_, describePeer(req_.peer));
    return Result::success();
  }

 private:
  ConnectRequest req_;
  std::shared_ptr<InprocFifo> fifo_;
  uint64_t id_;
  Blob blob_;
};

class InprocTransport final : public Transport {
 public:
  const char* name() const override { return "inproc"; }

  bool sharesMemory() const override { return true; }
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    return self.processId == peer.processId;
  }

  Result listen(const ConnectRequest& req, std::unique_ptr<RecvEndpoint>* out) override {
    fifo::Layout layout;
    BRAID_TRY(fifo::makeLayout(req.slotBytes, req.nslots, &layout));
    auto f = std::make_shared<InprocFifo>();
    f->memory = AlignedBuffer(layout.totalBytes, fifo::kPage);
    if (!f->memory.data())
      return fail(ncclSystemError, "cannot allocate %zu bytes for the in-process FIFO from %s",
                  layout.totalBytes, describePeer(req.peer).c_str());
    f->region = fifo::Region(f->memory.data(), layout);
    f->region.initialize();
    *out = std::make_unique<InprocEndpoint>(req, std::move(f));
    return Result::success();
  }

  Result connect(const ConnectRequest& req, const Blob& blob,
                 std::unique_ptr<SendConnection>* out) override {
    const std::string peer = describePeer(req.peer);
    BlobReader r(blob);
    uint64_t magic = 0, processId = 0, id = 0, slotBytes = 0;
    int32_t nslots = 0;
    if (!r.get(&magic) || !r.get(&processId) || !r.get(&id) || !r.get(&slotBytes) ||
        !r.get(&nslots) || !r.atEnd() || magic != kBlobMagic)
      return fail(ncclInternalError, "malformed in-process connect blob from %s (%zu bytes)",
                  peer.c_str(), blob.size());
    if (processId != req.self.processId)
      return fail(ncclInternalError, "in-process connect blob from %s was made by another "
                  "process: the transport selection disagrees between ranks", peer.c_str());
    if (slotBytes != req.slotBytes || nslots != req.nslots)
      return fail(ncclInternalError, "%s listens with %d x %llu byte slots but this rank "
                  "connects with %d x %zu: ranks disagree on the buffer size",
                  peer.c_str(), nslots, static_cast<unsigned long long>(slotBytes), req.nslots,
                  req.slotBytes);
    std::shared_ptr<InprocFifo> f = registry().find(id);
    if (!f)
      return fail(ncclInternalError, "the in-process FIFO offered by %s is gone (its endpoint "
                  "was destroyed before this rank connected; did it abort?)", peer.c_str());
    if (f->region.control()->attached.exchange(1, std::memory_order_acq_rel) != 0)
      return fail(ncclInternalError, "the in-process FIFO offered by %s already has a sender",
                  peer.c_str());
    *out = std::make_unique<InprocSend>(std::move(f));
    BRAID_TRACE(kLogP2P, "inproc: connected to %s channel %d", peer.c_str(), req.channel);
    return Result::success();
  }
};

}  // namespace

std::unique_ptr<Transport> makeInprocTransport() { return std::make_unique<InprocTransport>(); }

}  // namespace braid
