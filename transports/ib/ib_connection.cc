#include "transports/ib/ib_connection.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "transports/common/connect_util.h"
#include "transports/ib/ib_completion.h"

namespace braid::ib {

namespace {

constexpr size_t kPageBytes = 4096;
constexpr int kPollBatch = 16;

size_t roundUpToPage(size_t n) { return (n + kPageBytes - 1) / kPageBytes * kPageBytes; }

std::string connectionName(const transports::ConnectRequest& req) {
  return common::describePeer(req.peer) + ", channel " + std::to_string(req.channel);
}

Result postFailed(const char* call, int rc, const std::string& peer) {
  return fail(ncclSystemError, "ib: %s to %s failed: %s", call, peer.c_str(), strerror(rc));
}

}  // namespace

uint32_t senderQueueDepth(uint32_t nslots) { return std::clamp<uint32_t>(2 * nslots, 4, 4096); }
uint32_t senderSignalEvery(uint32_t nslots) {
  return std::max<uint32_t>(1, std::min(nslots, senderQueueDepth(nslots)) / 2);
}

Result checkHandshakeSocket(int fd, const std::string& peer) {
  if (fd < 0) return Result::success();
  char c;
  const ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0)
    return fail(ncclRemoteError,
                "ib: %s closed its connection (the process exited or destroyed its communicator)",
                peer.c_str());
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
    return fail(ncclRemoteError, "ib: lost %s: %s", peer.c_str(), strerror(errno));
  return Result::success();
}

// ---- IbQpResources ----------------------------------------------------------

Result IbQpResources::create(std::shared_ptr<IbDevice> device, const Shape& shape,
                             std::unique_ptr<IbQpResources>* out) {
  std::unique_ptr<IbQpResources> r(new IbQpResources());
  r->device_ = std::move(device);
  const auto& lib = r->device_->lib();
  r->controlBytes_ = roundUpToPage(shape.controlBytes);
  // Whole pages: the registration must not cover (and expose) a neighbour's memory.
  const size_t bytes = roundUpToPage(r->controlBytes_ + shape.ringBytes);
  r->buffer_ = AlignedBuffer(bytes, kPageBytes);
  if (!r->buffer_.data())
    return fail(ncclSystemError, "ib: cannot allocate %zu bytes of slots", bytes);
  r->registrar_ = std::make_unique<VerbsMrRegistrar>(lib, r->device_->pd(),
                                                     kAccessLocalWrite | kAccessRemoteWrite);
  // One range per connection: no eviction can ever drop it while in use.
  r->cache_ = std::make_unique<MrCache>(r->registrar_.get(), 4, kPageBytes);
  MrKeys whole;
  BRAID_TRY(r->cache_->get(r->buffer_.data(), bytes, &whole));

  const uint32_t cqEntries = shape.sendDepth + shape.recvDepth;
  BRAID_TRY(createCq(lib, r->device_->context(), static_cast<int>(cqEntries), &r->cq_));
  IbvQpInitAttr attr;
  memset(&attr, 0, sizeof(attr));
  attr.sendCq = r->cq_.get();
  attr.recvCq = r->cq_.get();
  attr.cap.maxSendWr = shape.sendDepth;
  attr.cap.maxRecvWr = std::max<uint32_t>(shape.recvDepth, 1);
  attr.cap.maxSendSge = 1;
  attr.cap.maxRecvSge = 1;
  attr.cap.maxInlineData = kInlineBytes;
  attr.qpType = kQpRc;
  BRAID_TRY(createQp(lib, r->device_->pd(), &attr, &r->qp_));

  r->local_.port = r->device_->port();
  r->local_.gidIndex = r->device_->gidIndex();
  r->local_.mtu = r->device_->mtu();
  r->local_.psn = static_cast<uint32_t>(common::randomU64()) & 0xffffff;
  *out = std::move(r);
  return Result::success();
}

IbQpResources::~IbQpResources() = default;

Result IbQpResources::keys(const void* addr, size_t bytes, MrKeys* out) {
  return cache_->get(addr, bytes, out);
}

IbConnInfo IbQpResources::address() const {
  IbConnInfo a;
  a.qpn = qp_.get()->qpNum;
  a.psn = local_.psn;
  a.lid = device_->lid();
  a.port = device_->port();
  a.mtu = device_->mtu();
  a.linkLayer = device_->linkLayer();
  memcpy(a.gid, device_->gid(), sizeof(a.gid));
  return a;
}

// ---- IbSend -----------------------------------------------------------------

Result IbSend::create(std::unique_ptr<IbQpResources> res, UniqueFd handshake, const RemoteRing& ring,
                      const transports::ConnectRequest& req, std::unique_ptr<IbSend>* out) {
  std::unique_ptr<IbSend> s(new IbSend());
  s->slotBytes_ = req.slotBytes;
  s->stride_ = slotStride(req.slotBytes);
  s->nslots_ = static_cast<uint32_t>(req.nslots);
  s->peer_ = connectionName(req);
  s->ring_ = ring;
  MrKeys k;
  BRAID_TRY(res->keys(res->ring(), ringBytes(req), &k));
  s->lkey_ = k.lkey;
  s->credit_ = reinterpret_cast<uint64_t*>(res->control());
  s->sq_ = std::make_unique<SendQueueWindow>(senderQueueDepth(s->nslots_),
                                             senderSignalEvery(s->nslots_));
  s->res_ = std::move(res);
  s->handshake_ = std::move(handshake);
  *out = std::move(s);
  return Result::success();
}

void* IbSend::acquire() {
  if (!error_.ok() || posted_ >= creditLimit() || sq_->full()) return nullptr;
  return res_->ring() + (posted_ % nslots_) * stride_;
}

void IbSend::post(size_t bytes, uint32_t mark, const void*) {
  if (!error_.ok()) return;
  const size_t slot = posted_ % nslots_;
  uint8_t* data = res_->ring() + slot * stride_;
  memcpy(data + bytes, &mark, kMarkBytes);
  IbvSge sge;
  sge.addr = reinterpret_cast<uintptr_t>(data);
  sge.length = static_cast<uint32_t>(bytes + kMarkBytes);
  sge.lkey = lkey_;
  IbvSendWr wr;
  memset(&wr, 0, sizeof(wr));
  const bool signalled = sq_->signalNext(false);
  wr.wrId = sq_->nextId();
  wr.sgList = &sge;
  wr.numSge = 1;
  wr.opcode = kWrRdmaWriteWithImm;
  wr.sendFlags = signalled ? unsigned{kSendSignaled} : 0u;
  wr.immData = htonl(static_cast<uint32_t>(bytes));
  wr.rdma.remoteAddr = ring_.addr + slot * stride_;
  wr.rdma.rkey = ring_.rkey;
  IbvSendWr* bad = nullptr;
  const int rc = postSend(res_->qp(), &wr, &bad);
  if (rc != 0) {
    error_ = postFailed("ibv_post_send (RDMA write with immediate)", rc, peer_);
    return;
  }
  sq_->posted(signalled);
  ++posted_;
}

Result IbSend::postMarker() {
  IbvSendWr wr;
  memset(&wr, 0, sizeof(wr));
  wr.wrId = sq_->nextId();
  wr.numSge = 0;
  wr.opcode = kWrRdmaWrite;
  wr.sendFlags = kSendSignaled;
  wr.rdma.remoteAddr = ring_.addr;
  wr.rdma.rkey = ring_.rkey;
  IbvSendWr* bad = nullptr;
  const int rc = postSend(res_->qp(), &wr, &bad);
  if (rc != 0) return postFailed("ibv_post_send (flush marker)", rc, peer_);
  sq_->posted(true);
  return Result::success();
}

Result IbSend::progress() {
  if (!error_.ok()) return error_;
  IbvWc wc[kPollBatch];
  int n;
  while ((n = pollCq(res_->cq(), kPollBatch, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != kWcSuccess) {
        error_ = completionError(wc[i], "RDMA write to", peer_);
        return error_;
      }
      sq_->completed(wc[i].wrId);
    }
  }
  if (n < 0) {
    error_ = fail(ncclSystemError, "ib: ibv_poll_cq for %s failed (%d)", peer_.c_str(), n);
    return error_;
  }
  // Idle with writes whose completion nobody asked for: ask, so flushed() can turn true.
  if (posted_ == postedAtLastProgress_ && !sq_->drained() && sq_->tailUnsignalled() &&
      !sq_->full()) {
    error_ = postMarker();
    if (!error_.ok()) return error_;
  }
  postedAtLastProgress_ = posted_;
  return Result::success();
}

bool IbSend::flushed() const { return !error_.ok() || sq_->drained(); }

Result IbSend::checkPeer() {
  if (!error_.ok()) return error_;
  return checkHandshakeSocket(handshake_.get(), peer_);
}

// ---- IbRecv -----------------------------------------------------------------

Result IbRecv::create(std::unique_ptr<IbQpResources> res, UniqueFd handshake, const RemoteCredit& credit,
                      const transports::ConnectRequest& req, std::unique_ptr<IbRecv>* out) {
  std::unique_ptr<IbRecv> r(new IbRecv());
  r->slotBytes_ = req.slotBytes;
  r->stride_ = slotStride(req.slotBytes);
  r->nslots_ = static_cast<uint32_t>(req.nslots);
  r->creditBatch_ = std::max<uint32_t>(1, r->nslots_ / 4);
  r->peer_ = connectionName(req);
  r->credit_ = credit;
  r->sizes_.assign(r->nslots_, 0);
  r->sq_ = std::make_unique<SendQueueWindow>(kReceiverQueueDepth, kReceiverQueueDepth / 2);
  r->res_ = std::move(res);
  r->handshake_ = std::move(handshake);
  for (uint32_t i = 0; i < r->nslots_; ++i) BRAID_TRY(r->postReceive());
  // The first credit tells the sender that the receives are posted.
  r->creditPending_ = true;
  BRAID_TRY(r->sendCredit());
  *out = std::move(r);
  return Result::success();
}

Result IbRecv::postReceive() {
  IbvRecvWr wr;
  memset(&wr, 0, sizeof(wr));
  wr.numSge = 0;  // the data lands by RDMA write; the receive only carries the immediate
  IbvRecvWr* bad = nullptr;
  const int rc = ib::postRecv(res_->qp(), &wr, &bad);
  if (rc != 0) return postFailed("ibv_post_recv", rc, peer_);
  return Result::success();
}

Result IbRecv::sendCredit() {
  if (!creditPending_ || sq_->full()) return Result::success();  // progress() retries
  const uint64_t limit = released_ + nslots_;
  IbvSge sge;
  sge.addr = reinterpret_cast<uintptr_t>(&limit);  // inline: copied by the post itself
  sge.length = sizeof(limit);
  sge.lkey = 0;
  IbvSendWr wr;
  memset(&wr, 0, sizeof(wr));
  const bool signalled = sq_->signalNext(false);
  wr.wrId = sq_->nextId();
  wr.sgList = &sge;
  wr.numSge = 1;
  wr.opcode = kWrRdmaWrite;
  wr.sendFlags = kSendInline | (signalled ? unsigned{kSendSignaled} : 0u);
  wr.rdma.remoteAddr = credit_.addr;
  wr.rdma.rkey = credit_.rkey;
  IbvSendWr* bad = nullptr;
  const int rc = postSend(res_->qp(), &wr, &bad);
  if (rc != 0) return postFailed("ibv_post_send (credit)", rc, peer_);
  sq_->posted(signalled);
  credited_ = released_;
  creditPending_ = false;
  return Result::success();
}

const void* IbRecv::peek(size_t* bytes, uint32_t* mark) {
  if (!error_.ok() || released_ == arrived_) return nullptr;
  const size_t slot = released_ % nslots_;
  *bytes = sizes_[slot];
  const uint8_t* data = res_->ring() + slot * stride_;
  if (mark) memcpy(mark, data + *bytes, kMarkBytes);
  return data;
}

void IbRecv::release() {
  if (!error_.ok() || released_ == arrived_) return;
  ++released_;
  if (released_ - credited_ >= creditBatch_) {
    creditPending_ = true;
    error_ = sendCredit();
  }
}

Result IbRecv::progress() {
  if (!error_.ok()) return error_;
  IbvWc wc[kPollBatch];
  int n;
  while ((n = pollCq(res_->cq(), kPollBatch, wc)) > 0) {
    for (int i = 0; i < n; ++i) {
      const IbvWc& c = wc[i];
      const bool isRecv = c.opcode == kWcRecvRdmaWithImm;
      if (c.status != kWcSuccess) {
        error_ = completionError(c, isRecv ? "receiving from" : "returning credits to", peer_);
        return error_;
      }
      if (!isRecv) {
        sq_->completed(c.wrId);
        continue;
      }
      const uint32_t bytes = ntohl(c.immData);
      if (!(c.wcFlags & kWcWithImm) || bytes > slotBytes_ || arrived_ - released_ >= nslots_) {
        error_ = fail(ncclRemoteError,
                      "ib: %s wrote %u bytes into a %zu-byte slot (%llu slots unreleased of %u): "
                      "mixed builds?",
                      peer_.c_str(), bytes, slotBytes_,
                      static_cast<unsigned long long>(arrived_ - released_), nslots_);
        return error_;
      }
      sizes_[arrived_ % nslots_] = bytes;
      ++arrived_;
      error_ = postReceive();
      if (!error_.ok()) return error_;
    }
  }
  if (n < 0) {
    error_ = fail(ncclSystemError, "ib: ibv_poll_cq for %s failed (%d)", peer_.c_str(), n);
    return error_;
  }
  error_ = sendCredit();
  return error_;
}

Result IbRecv::checkPeer() {
  if (!error_.ok()) return error_;
  return checkHandshakeSocket(handshake_.get(), peer_);
}

}  // namespace braid::ib
