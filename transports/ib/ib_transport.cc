#include "transports/ib/ib_transport.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "base/env.h"
#include "base/log.h"
#include "base/socket.h"
#include "transports/common/connect_util.h"
#include "transports/ib/ib_blob.h"
#include "transports/ib/ib_connection.h"
#include "transports/ib/ib_device.h"
#include "transports/tcp/socket_util.h"

namespace braid::ib {

namespace {

using ib::IbConnInfo;
using ib::IbHello;

// A stranger that connects to the handshake port and says nothing is dropped
// after this long (bounded by the connect deadline).
constexpr auto kHelloPatience = std::chrono::seconds(10);
constexpr size_t kHandshakeSocketBytes = 64 << 10;

std::string describePorts(const std::vector<ib::PortDesc>& ports) {
  std::string s;
  for (const auto& p : ports) {
    if (!s.empty()) s += ",";
    s += p.device + ":" + std::to_string(p.port) +
         (p.linkLayer == ib::LinkLayer::InfiniBand ? "/IB" : "/RoCE");
  }
  return s;
}

std::string connectionName(const transports::ConnectRequest& req) {
  return common::describePeer(req.peer) + ", channel " + std::to_string(req.channel);
}

Result checkGeometry(const transports::ConnectRequest& req) {
  if (req.slotBytes == 0 || req.slotBytes > UINT32_MAX || req.nslots <= 0 ||
      static_cast<uint32_t>(req.nslots) > ib::kMaxIbSlots)
    return fail(ncclInvalidArgument, "ib FIFO of %d slots of %zu bytes to %s is out of range", req.nslots,
                req.slotBytes, common::describePeer(req.peer).c_str());
  return Result::success();
}

ib::IbQpResources::Shape senderShape(const transports::ConnectRequest& req) {
  ib::IbQpResources::Shape s;
  s.controlBytes = ib::kControlBytes;
  s.ringBytes = ib::ringBytes(req);
  s.sendDepth = ib::senderQueueDepth(static_cast<uint32_t>(req.nslots));
  s.recvDepth = 0;
  return s;
}

ib::IbQpResources::Shape receiverShape(const transports::ConnectRequest& req) {
  ib::IbQpResources::Shape s;
  s.ringBytes = ib::ringBytes(req);
  s.sendDepth = ib::kReceiverQueueDepth;
  s.recvDepth = static_cast<uint32_t>(req.nslots);
  return s;
}

// Reads exactly `size` bytes before `until` (or the request's deadline/abort).
// `*timedOut` distinguishes giving up on a silent peer from a failed request.
Result readExactly(int fd, uint8_t* buf, size_t size, const transports::ConnectRequest& req, Clock::time_point until,
                   const std::string& what, bool* timedOut) {
  size_t got = 0;
  *timedOut = false;
  while (got < size) {
    BRAID_TRY(common::checkWait(req, what));
    if (Clock::now() >= until) {
      *timedOut = true;
      return Result::success();
    }
    pollfd p{fd, POLLIN, 0};
    const int n = poll(&p, 1, common::pollTimeoutMs(req));
    if (n < 0 && errno != EINTR) return systemFail("poll while waiting for %s", what.c_str());
    if (n <= 0) continue;
    const ssize_t r = recv(fd, buf + got, size - got, MSG_DONTWAIT);
    if (r == 0) return fail(ncclRemoteError, "connection closed while waiting for %s", what.c_str());
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return systemFail("recv while waiting for %s", what.c_str());
    }
    got += static_cast<size_t>(r);
  }
  return Result::success();
}

IbConnInfo peerAddressOf(const IbHello& h) {
  IbConnInfo c;
  ib::copyQpAddress(h, &c);
  return c;
}

class IbEndpoint final : public transports::RecvEndpoint {
 public:
  IbEndpoint(const transports::ConnectRequest& req, std::unique_ptr<ib::IbQpResources> res, UniqueFd listenFd,
             Blob blob, uint64_t nonce)
      : req_(req), res_(std::move(res)), listen_(std::move(listenFd)), blob_(std::move(blob)), nonce_(nonce) {}

  const Blob& blob() const override { return blob_; }

  Result accept(std::unique_ptr<transports::RecvConnection>* out) override {
    if (!res_)
      return fail(ncclInternalError, "ib endpoint for %s accepted twice", connectionName(req_).c_str());
    UniqueFd fd;
    IbHello hello;
    BRAID_TRY(awaitHello(&fd, &hello));
    BRAID_TRY(ib::bringUpQp(*res_->device().lib(), res_->qp(), res_->local(), peerAddressOf(hello)));
    const uint32_t qpn = res_->qp()->qpNum;
    const std::string dev = res_->device().name();
    std::unique_ptr<ib::IbRecv> conn;
    BRAID_TRY(ib::IbRecv::create(std::move(res_), std::move(fd),
                                 ib::RemoteCredit{hello.creditAddr, hello.creditRkey}, req_, &conn));
    BRAID_INFO(kLogNet, "NET/IB: %s connected over %s (QP %u <- QP %u)",
               connectionName(req_).c_str(), dev.c_str(), qpn, hello.qpn);
    *out = std::move(conn);
    return Result::success();
  }

 private:
  // Accepts handshake connections until one presents this endpoint's nonce.
  Result awaitHello(UniqueFd* out, IbHello* hello) {
    const std::string what = connectionName(req_) + " to attach its ib queue pair";
    for (;;) {
      BRAID_TRY(common::checkWait(req_, what));
      pollfd p{listen_.get(), POLLIN, 0};
      const int n = poll(&p, 1, common::pollTimeoutMs(req_));
      if (n < 0 && errno != EINTR) return systemFail("poll on the ib handshake socket");
      if (n <= 0) continue;
      sockaddr_storage from{};
      socklen_t len = sizeof(from);
      UniqueFd fd(accept4(listen_.get(), reinterpret_cast<sockaddr*>(&from), &len,
                          SOCK_NONBLOCK | SOCK_CLOEXEC));
      if (!fd.valid()) continue;
      uint8_t bytes[ib::kIbHelloBytes];
      bool timedOut = false;
      Result r = readExactly(fd.get(), bytes, sizeof(bytes), req_, Clock::now() + kHelloPatience,
                             "the ib handshake of " + connectionName(req_), &timedOut);
      if (r.ok() && !timedOut) r = ib::decodeIbHello(bytes, sizeof(bytes), connectionName(req_).c_str(), hello);
      if (!r.ok() || timedOut || hello->nonce != nonce_) {
        if (common::abortRequested(req_) || Clock::now() >= req_.deadline) BRAID_TRY(common::checkWait(req_, what));
        BRAID_WARN("ib: dropped a connection from %s on the handshake port for %s: %s",
                   addrToString(from).c_str(), connectionName(req_).c_str(),
                   !r.ok() ? r.message().c_str() : timedOut ? "silent" : "wrong nonce");
        continue;
      }
      if (hello->slotBytes != req_.slotBytes || hello->nslots != static_cast<uint32_t>(req_.nslots))
        return fail(ncclInternalError,
                    "%s connects with %u x %u byte slots but this rank listens with %d x %zu: "
                    "ranks disagree on the buffer size",
                    connectionName(req_).c_str(), hello->nslots, hello->slotBytes, req_.nslots,
                    req_.slotBytes);
      listen_.reset();
      *out = std::move(fd);
      return Result::success();
    }
  }

  transports::ConnectRequest req_;
  std::unique_ptr<ib::IbQpResources> res_;
  UniqueFd listen_;
  Blob blob_;
  uint64_t nonce_;
};

class IbTransport : public transports::Transport {
 public:
  IbTransport(std::shared_ptr<const ib::IbProbeResult> probe, IbTransportOptions options)
      : probe_(std::move(probe)), options_(options) {}
  const char* name() const override { return "ib"; }

  bool canConnect(const PeerInfo& self, const PeerInfo& peer) const override {
    return options_.dataPath && probe_->usable && self.hostHash != peer.hostHash;
  }

  Result listen(const transports::ConnectRequest& req, std::unique_ptr<transports::RecvEndpoint>* out) override {
    BRAID_TRY(checkGeometry(req));
    std::shared_ptr<ib::IbDevice> dev;
    BRAID_TRY(device(req.channel, &dev));
    std::unique_ptr<ib::IbQpResources> res;
    BRAID_TRY(ib::IbQpResources::create(dev, receiverShape(req), &res));
    ib::MrKeys ring;
    BRAID_TRY(res->keys(res->ring(), ib::ringBytes(req), &ring));

    sockaddr_storage self{}, bound{};
    BRAID_TRY(tcp::peerAddress(req.self, &self));
    UniqueFd listenFd;
    BRAID_TRY(listenOn(self, kHandshakeSocketBytes, &listenFd, &bound));

    IbConnInfo info = res->address();
    info.ringAddr = reinterpret_cast<uintptr_t>(res->ring());
    info.rkey = ring.rkey;
    info.slotBytes = static_cast<uint32_t>(req.slotBytes);
    info.nslots = static_cast<uint32_t>(req.nslots);
    static_assert(sizeof(info.handshakeAddr) >= sizeof(bound), "handshake address too small");
    memcpy(info.handshakeAddr, &bound, sizeof(bound));
    info.nonce = common::randomU64();
    *out = std::make_unique<IbEndpoint>(req, std::move(res), std::move(listenFd),
                                        ib::encodeIbBlob(info), info.nonce);
    return Result::success();
  }

  Result connect(const transports::ConnectRequest& req, const Blob& blob,
                 std::unique_ptr<transports::SendConnection>* out) override {
    BRAID_TRY(checkGeometry(req));
    const std::string peer = connectionName(req);
    IbConnInfo remote;
    BRAID_TRY(ib::decodeIbBlob(blob, peer.c_str(), &remote));
    if (remote.slotBytes != req.slotBytes || remote.nslots != static_cast<uint32_t>(req.nslots))
      return fail(ncclInternalError,
                  "%s listens with %u x %u byte slots but this rank connects with %d x %zu: "
                  "ranks disagree on the buffer size",
                  peer.c_str(), remote.nslots, remote.slotBytes, req.nslots, req.slotBytes);
    std::shared_ptr<ib::IbDevice> dev;
    BRAID_TRY(device(req.channel, &dev));
    std::unique_ptr<ib::IbQpResources> res;
    BRAID_TRY(ib::IbQpResources::create(dev, senderShape(req), &res));
    ib::MrKeys credit;
    BRAID_TRY(res->keys(res->control(), sizeof(uint64_t), &credit));
    BRAID_TRY(ib::bringUpQp(*dev->lib(), res->qp(), res->local(), remote));

    sockaddr_storage at{};
    memcpy(&at, remote.handshakeAddr, sizeof(at));
    if (at.ss_family != AF_INET && at.ss_family != AF_INET6)
      return fail(ncclInternalError, "ib connect blob from %s has no handshake address", peer.c_str());
    UniqueFd fd;
    BRAID_TRY(tcp::connectTo(at, req, kHandshakeSocketBytes, peer, &fd));
    IbHello hello;
    hello.nonce = remote.nonce;
    ib::copyQpAddress(res->address(), &hello);
    hello.creditAddr = reinterpret_cast<uintptr_t>(res->control());
    hello.creditRkey = credit.rkey;
    hello.slotBytes = static_cast<uint32_t>(req.slotBytes);
    hello.nslots = static_cast<uint32_t>(req.nslots);
    hello.rank = req.self.rank;
    hello.channel = req.channel;
    const Blob bytes = ib::encodeIbHello(hello);
    BRAID_TRY(tcp::sendAll(fd.get(), bytes.data(), bytes.size(), req, peer));

    BRAID_INFO(kLogNet, "NET/IB: %s connecting over %s (QP %u -> QP %u)", peer.c_str(),
               dev->name().c_str(), hello.qpn, remote.qpn);
    std::unique_ptr<ib::IbSend> conn;
    BRAID_TRY(ib::IbSend::create(std::move(res), std::move(fd),
                                 ib::RemoteRing{remote.ringAddr, remote.rkey}, req, &conn));
    *out = std::move(conn);
    return Result::success();
  }

 private:
  // Channels spread over the usable ports; each port is opened once per transport.
  Result device(int channel, std::shared_ptr<ib::IbDevice>* out) {
    if (!probe_->usable || probe_->ports.empty())
      return fail(ncclInternalError, "the ib transport has no usable port (%s)", probe_->reason.c_str());
    const size_t index = static_cast<size_t>(channel >= 0 ? channel : 0) % probe_->ports.size();
    std::lock_guard<std::mutex> lock(mutex_);
    auto& slot = devices_[index];
    if (!slot) BRAID_TRY(ib::IbDevice::open(probe_->lib, probe_->ports[index], probe_->gidIndex, &slot));
    *out = slot;
    return Result::success();
  }

  std::shared_ptr<const ib::IbProbeResult> probe_;
  IbTransportOptions options_;
  std::mutex mutex_;
  std::map<size_t, std::shared_ptr<ib::IbDevice>> devices_;
};

void logChoice(const ib::IbProbeResult& p, const IbTransportOptions& o) {
  if (!p.usable) {
    BRAID_INFO(kLogNet | kLogInit, "NET/IB: no InfiniBand/RoCE device; using TCP (%s)",
               p.reason.c_str());
  } else if (!o.dataPath) {
    BRAID_INFO(kLogNet | kLogInit,
               "NET/IB: found %s, but the IB data path is off (BRAID_IB_DATAPATH=1 enables it; "
               "it was never run on hardware); using TCP",
               describePorts(p.ports).c_str());
  } else {
    BRAID_INFO(kLogNet | kLogInit,
               "NET/IB: BRAID_IB_DATAPATH=1: using %s for pairs on different hosts "
               "(experimental: never run on hardware)",
               describePorts(p.ports).c_str());
  }
}

}  // namespace

IbTransportOptions ibTransportOptionsFromEnv() {
  IbTransportOptions o;
  o.dataPath = envBool("BRAID_IB_DATAPATH", false);
  return o;
}

std::unique_ptr<transports::Transport> makeIbTransport(ib::IbProbeResult probe, IbTransportOptions options) {
  return std::make_unique<IbTransport>(std::make_shared<const ib::IbProbeResult>(std::move(probe)),
                                       options);
}

std::unique_ptr<transports::Transport> makeIbTransport() {
  // One probe per process: every communicator would otherwise dlopen and log again.
  static std::once_flag once;
  static std::shared_ptr<const ib::IbProbeResult> probe;
  static IbTransportOptions options;
  std::call_once(once, [] {
    probe = std::make_shared<const ib::IbProbeResult>(ib::probeIb(ib::ibProbeOptionsFromEnv()));
    options = ibTransportOptionsFromEnv();
    logChoice(*probe, options);
  });
  return std::make_unique<IbTransport>(probe, options);
}

}  // namespace braid::ib
