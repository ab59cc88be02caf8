#include "transports/shm/shm_transport.h"

#include <nccl.h>

#include <chrono>
#include <thread>
#include <vector>

#include "base/env.h"
#include "base/log.h"
#include "base/blob.h"
#include "transports/common/connect_util.h"
#include "transports/common/fifo.h"
#include "base/process_liveness.h"
#include "transports/shm/shm_segment.h"

namespace braid {
namespace {

constexpr uint64_t kBlobMagic = 0x4d4853444941524bull;  // "KRAIDSHM"
constexpr size_t kMaxNameLength = 255;

std::string purposeOf(const ConnectRequest& req, const char* direction) {
  return std::string("channel ") + std::to_string(req.channel) + " " + direction + " " +
         describePeer(req.peer);
}

// The FIFO has no connection that breaks when the peer dies; a waiting step
// asks the kernel whether the peer's process is still there.
Result checkPeerAlive(const PeerInfo& self, const PeerInfo& peer, const char* waitingFor) {
  return checkPeerProcess(self, peer,
                          "rank " + std::to_string(self.rank) + " waited " + waitingFor + " it over shared memory");
}

class ShmSend final : public SendConnection {
 public:
  ShmSend(ShmMapping mapping, const fifo::Layout& layout, const PeerInfo& self, const PeerInfo& peer)
      : mapping_(std::move(mapping)), sender_(fifo::Region(mapping_.data(), layout)), self_(self), peer_(peer) {}
  void* acquire() override { return sender_.acquire(); }
  void post(size_t bytes) override { sender_.post(bytes); }
  Result progress() override { return Result::success(); }
  bool flushed() const override { return true; }
  // A peer that finished and exited has read everything it needed: only a
  // full FIFO, which nobody will drain, makes its death this rank's error.
  Result checkPeer() override {
    Result alive = checkPeerAlive(self_, peer_, "to send to");
    if (!alive.ok() && sender_.acquire()) return Result::success();
    return alive;
  }

 private:
  ShmMapping mapping_;
  fifo::Sender sender_;
  PeerInfo self_, peer_;
};

class ShmRecv final : public RecvConnection {
 public:
  ShmRecv(ShmMapping mapping, const fifo::Layout& layout, const PeerInfo& self, const PeerInfo& peer)
      : mapping_(std::move(mapping)), receiver_(fifo::Region(mapping_.data(), layout)),
        slotBytes_(layout.slotBytes), peer_(describePeer(peer)), selfInfo_(self), peerInfo_(peer) {}
  const void* peek(size_t* bytes) override { return receiver_.peek(bytes); }
  void release() override { receiver_.release(); }
  Result progress() override {
    if (receiver_.badSize())
      return fail(ncclRemoteError, "shared memory FIFO from %s holds a slot of %llu bytes, "
                  "more than the slot size %zu: the peer corrupted the segment",
                  peer_.c_str(), static_cast<unsigned long long>(receiver_.badSize()),
                  slotBytes_);
    return Result::success();
  }
  // A peer may post its last slots and exit before this rank reads them: its
  // death is an error only once the FIFO is empty. Liveness is read first, so
  // data written before the exit is visible to the peek that follows.
  Result checkPeer() override {
    Result alive = checkPeerAlive(selfInfo_, peerInfo_, "for data from");
    size_t bytes = 0;
    if (!alive.ok() && receiver_.peek(&bytes)) return Result::success();
    return alive;
  }

 private:
  ShmMapping mapping_;
  fifo::Receiver receiver_;
  size_t slotBytes_;
  std::string peer_;
  PeerInfo selfInfo_, peerInfo_;
};

class ShmEndpoint final : public RecvEndpoint {
 public:
  ShmEndpoint(const ConnectRequest& req, const fifo::Layout& layout, ShmName name,
              ShmMapping mapping)
      : req_(req), layout_(layout), name_(std::move(name)), mapping_(std::move(mapping)) {
    BlobWriter(&blob_)
        .put(kBlobMagic)
        .put(static_cast<uint64_t>(layout.totalBytes))
        .put(static_cast<uint64_t>(req.slotBytes))
        .put(static_cast<int32_t>(req.nslots))
        .putString(name_.str());
  }
  // ~ShmName unlinks a segment nobody accepted.

  const Blob& blob() const override { return blob_; }

  Result accept(std::unique_ptr<RecvConnection>* out) override {
    if (!mapping_.data())
      return fail(ncclInternalError, "shm endpoint for %s accepted twice",
                  describePeer(req_.peer).c_str());
    const fifo::Control* ctl = fifo::Region(mapping_.data(), layout_).control();
    std::string what = describePeer(req_.peer) + " to attach to shared memory segment /dev/shm" +
                       name_.str() + " (channel " + std::to_string(req_.channel) + ")";
    Result waited = waitUntil(req_, what, [ctl] {
      return ctl->attached.load(std::memory_order_acquire) != 0;
    });
    // Attached or not, the name has served its purpose: drop it now so a crash
    // of either process later cannot leak the segment.
    name_.unlink();
    BRAID_TRY(waited);
    *out = std::make_unique<ShmRecv>(std::move(mapping_), layout_, req_.self, req_.peer);
    return Result::success();
  }

 private:
  ConnectRequest req_;
  fifo::Layout layout_;
  ShmName name_;
  ShmMapping mapping_;
  Blob blob_;
};

class ShmTransport final : public Transport {
 public:
  ShmTransport() : disabled_(envInt("NCCL_SHM_DISABLE", 0) == 1) {
    if (disabled_) BRAID_INFO(kLogShm | kLogEnv, "NCCL_SHM_DISABLE=1: shared memory transport off");
  }

  const char* name() const override { return "shm"; }

  bool sharesMemory() const override { return true; }
  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    return !disabled_ && self.hostHash == peer.hostHash && self.shmDomain == peer.shmDomain &&
           self.processId != peer.processId;
  }

  void cleanUpAfterDeadPeers(const PeerInfo& self, const std::vector<PeerInfo>& peers,
                             std::chrono::milliseconds patience) override {
    const auto until = std::chrono::steady_clock::now() + patience;
    std::vector<const PeerInfo*> alive;
    for (const PeerInfo& p : peers)
      if (p.shmDomain == self.shmDomain && p.processId != self.processId) alive.push_back(&p);
    for (;;) {
      for (size_t i = alive.size(); i-- > 0;) {
        if (!peerProcessGone(self, *alive[i])) continue;
        removeSegmentsOfProcess(alive[i]->pid);
        alive.erase(alive.begin() + static_cast<ptrdiff_t>(i));
      }
      if (alive.empty() || std::chrono::steady_clock::now() >= until) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  Result listen(const ConnectRequest& req, std::unique_ptr<RecvEndpoint>* out) override {
    fifo::Layout layout;
    BRAID_TRY(fifo::makeLayout(req.slotBytes, req.nslots, &layout));
    ShmName name;
    ShmMapping mapping;
    BRAID_TRY(createShmSegment(layout.totalBytes, purposeOf(req, "from"), &name, &mapping));
    fifo::Region(mapping.data(), layout).initialize();
    BRAID_INFO(kLogShm, "shm: channel %d from %s: segment /dev/shm%s, %u x %zu bytes",
               req.channel, describePeer(req.peer).c_str(), name.str().c_str(), layout.nslots,
               layout.slotBytes);
    *out = std::make_unique<ShmEndpoint>(req, layout, std::move(name), std::move(mapping));
    return Result::success();
  }

  Result connect(const ConnectRequest& req, const Blob& blob,
                 std::unique_ptr<SendConnection>* out) override {
    const std::string peer = describePeer(req.peer);
    BlobReader r(blob);
    uint64_t magic = 0, totalBytes = 0, slotBytes = 0;
    int32_t nslots = 0;
    std::string name;
    if (!r.get(&magic) || !r.get(&totalBytes) || !r.get(&slotBytes) || !r.get(&nslots) ||
        !r.getString(&name, kMaxNameLength) || !r.atEnd() || magic != kBlobMagic ||
        name.empty() || name[0] != '/')
      return fail(ncclInternalError, "malformed shm connect blob from %s (%zu bytes)",
                  peer.c_str(), blob.size());
    if (slotBytes != req.slotBytes || nslots != req.nslots)
      return fail(ncclInternalError, "%s listens with %d x %llu byte slots but this rank "
                  "connects with %d x %zu: ranks disagree on the buffer size",
                  peer.c_str(), nslots, static_cast<unsigned long long>(slotBytes), req.nslots,
                  req.slotBytes);
    fifo::Layout layout;
    BRAID_TRY(fifo::makeLayout(req.slotBytes, req.nslots, &layout));
    if (layout.totalBytes != totalBytes)
      return fail(ncclInternalError, "shm segment of %s has %llu bytes, this build expects %zu: "
                  "mixed braid versions?", peer.c_str(),
                  static_cast<unsigned long long>(totalBytes), layout.totalBytes);
    ShmMapping mapping;
    BRAID_TRY(openShmSegment(name, layout.totalBytes, purposeOf(req, "to"), &mapping));
    fifo::Region region(mapping.data(), layout);
    BRAID_TRY(region.validate().context("shm connect to " + peer));
    if (region.control()->attached.exchange(1, std::memory_order_acq_rel) != 0)
      return fail(ncclInternalError, "shm segment /dev/shm%s of %s already has a sender",
                  name.c_str(), peer.c_str());
    *out = std::make_unique<ShmSend>(std::move(mapping), layout, req.self, req.peer);
    return Result::success();
  }

 private:
  bool disabled_;
};

}  // namespace

std::unique_ptr<Transport> makeShmTransport() { return std::make_unique<ShmTransport>(); }

}  // namespace braid
