#include "transports/tcp/tcp_transport.h"

#include <nccl.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "base/log.h"
#include "base/socket.h"
#include "transports/common/connect_util.h"
#include "transports/tcp/socket_count.h"
#include "transports/tcp/socket_util.h"
#include "transports/tcp/tcp_connection.h"
#include "transports/tcp/tcp_wire.h"

namespace braid::tcp {
namespace {

using tcp::Hello;
using tcp::kHelloMagic;
// Strangers may connect and say nothing; keep at most this many waiting.
constexpr size_t kMaxPending = 32;

// Socket buffers that hold the whole FIFO in flight across the connection's
// sockets, within sane bounds per socket.
size_t bufferBytesFor(const transports::ConnectRequest& req, int nsockets) {
  size_t fifo = req.slotBytes * static_cast<size_t>(std::max(req.nslots, 1));
  return std::clamp<size_t>(fifo / static_cast<size_t>(nsockets), 256 << 10, 8 << 20);
}

std::string connectionName(const transports::ConnectRequest& req) {
  return common::describePeer(req.peer) + ", channel " + std::to_string(req.channel);
}

Result checkGeometry(const transports::ConnectRequest& req) {
  if (req.slotBytes == 0 || req.nslots <= 0)
    return fail(ncclInvalidArgument,
                "TCP FIFO of %d slots of %zu bytes to %s: both must be "
                "positive",
                req.nslots, req.slotBytes, common::describePeer(req.peer).c_str());
  return Result::success();
}

// A connection accepted on the listening socket whose hello is still arriving.
struct Pending {
  UniqueFd fd;
  std::string from;
  Hello hello{};
  size_t got = 0;
};

class TcpEndpoint final : public transports::RecvEndpoint {
 public:
  TcpEndpoint(const transports::ConnectRequest& req, UniqueFd listenFd, const sockaddr_storage& bound, uint64_t nonce,
              int nsockets)
      : req_(req), listen_(std::move(listenFd)), nonce_(nonce), data_(nsockets) {
    blob_ = tcp::encodeBlob({nonce_, req.slotBytes, req.nslots, nsockets, bound});
  }

  const Blob& blob() const override { return blob_; }

  Result accept(std::unique_ptr<transports::RecvConnection>* out) override {
    if (!listen_.valid())
      return fail(ncclInternalError, "TCP endpoint for %s accepted twice", common::describePeer(req_.peer).c_str());
    const std::string what = connectionName(req_) + " to connect over TCP";
    while (connected_ < data_.size()) {
      BRAID_TRY(common::checkWait(
          req_, what + " (" + std::to_string(connected_) + " of " + std::to_string(data_.size()) + " sockets in)"));
      BRAID_TRY(pollOnce());
    }
    listen_.reset();
    dropStrangers();
    for (const UniqueFd& fd : data_) setNoDelay(fd.get());
    BRAID_INFO(kLogNet, "tcp: %s connected with %zu socket(s)", connectionName(req_).c_str(),
               data_.size());
    auto conn = std::make_unique<TcpRecv>(std::move(data_), req_.slotBytes, req_.nslots,
                                          connectionName(req_));
    if (!conn->allocated())
      return fail(ncclSystemError, "cannot allocate %d x %zu bytes of TCP receive slots for %s", req_.nslots,
                  req_.slotBytes, common::describePeer(req_.peer).c_str());
    *out = std::move(conn);
    return Result::success();
  }

 private:
  // One poll over the listening socket and the pending hellos; fills data_ as
  // the sender's sockets introduce themselves.
  Result pollOnce() {
    std::vector<pollfd> fds;
    fds.push_back({listen_.get(), POLLIN, 0});
    for (const Pending& p : pending_) fds.push_back({p.fd.get(), POLLIN, 0});
    int n = poll(fds.data(), fds.size(), common::pollTimeoutMs(req_));
    if (n < 0 && errno != EINTR) return systemFail("poll on a listening TCP socket");
    if (n <= 0) return Result::success();
    // Read hellos before accepting, so indices still match `fds`.
    for (size_t i = pending_.size(); i-- > 0;) {
      if (!fds[i + 1].revents) continue;
      bool done = false;
      BRAID_TRY(readHello(&pending_[i], &done));
      if (!done) continue;
      if (pending_[i].fd.valid()) take(&pending_[i]);
      pending_.erase(pending_.begin() + static_cast<long>(i));
      if (connected_ == data_.size()) return Result::success();
    }
    if (fds[0].revents) acceptAll();
    return Result::success();
  }

  // A socket whose hello passed readHello(): it fills its place in stripe order.
  void take(Pending* p) {
    UniqueFd& place = data_[static_cast<size_t>(p->hello.socketIndex)];
    if (place.valid()) {
      bool ignored = false;
      (void)drop(p, &ignored, ("a second socket " + std::to_string(p->hello.socketIndex)).c_str());
      return;
    }
    place = std::move(p->fd);
    ++connected_;
  }

  void acceptAll() {
    for (;;) {
      sockaddr_storage from{};
      socklen_t len = sizeof(from);
      int fd = accept4(listen_.get(), reinterpret_cast<sockaddr*>(&from), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or a connection that died in the backlog
      if (pending_.size() >= kMaxPending) {
        BRAID_WARN("tcp: dropping a silent connection from %s on the port for %s: too many "
                   "connections without a hello", pending_.front().from.c_str(),
                   connectionName(req_).c_str());
        pending_.erase(pending_.begin());
      }
      Pending p;
      p.fd.reset(fd);
      p.from = addrToString(from);
      pending_.push_back(std::move(p));
    }
  }

  // Reads what is available of `p`'s hello. `done` means the connection is
  // finished with: p->fd is still valid if it is ours, reset if it was dropped.
  Result readHello(Pending* p, bool* done) {
    ssize_t r = recv(p->fd.get(), reinterpret_cast<uint8_t*>(&p->hello) + p->got,
                     sizeof(Hello) - p->got, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Result::success();
    if (r <= 0) return drop(p, done, r == 0 ? "closed before its hello" : strerror(errno));
    p->got += static_cast<size_t>(r);
    if (p->got < sizeof(Hello)) return Result::success();
    Hello h{};
    Result decoded = tcp::decodeHello(&p->hello, sizeof(Hello), nonce_, &h);
    if (!decoded.ok()) return drop(p, done, decoded.message().c_str());
    p->hello = h;
    if (h.slotBytes != req_.slotBytes || h.nslots != req_.nslots)
      return fail(ncclInternalError, "%s connects with %d x %llu byte slots but this rank "
                  "listens with %d x %zu: ranks disagree on the buffer size",
                  connectionName(req_).c_str(), h.nslots,
                  static_cast<unsigned long long>(h.slotBytes), req_.nslots, req_.slotBytes);
    if (h.nsockets != static_cast<int>(data_.size()))
      return fail(ncclInternalError, "%s connects with %d TCP sockets per connection but this "
                  "rank listens with %zu, as its blob says: do the ranks run different braid "
                  "builds?", connectionName(req_).c_str(), h.nsockets, data_.size());
    if (h.rank != req_.peer.rank || h.channel != req_.channel)
      BRAID_WARN("tcp: hello with the right nonce claims rank %d channel %d, expected %s",
                 h.rank, h.channel, connectionName(req_).c_str());
    BRAID_INFO(kLogNet, "tcp: %s socket %d of %d connected from %s",
               connectionName(req_).c_str(), h.socketIndex, h.nsockets, p->from.c_str());
    *done = true;
    return Result::success();
  }

  // Connections still pending once the real sender is in are not ours: say
  // what each sent before hanging up on it.
  void dropStrangers() {
    for (Pending& p : pending_) {
      bool done = false;
      if (!readHello(&p, &done).ok() || done) continue;  // readHello logged it
      bool ignored = false;
      (void)drop(&p, &ignored, p.got == 0 ? "silent (no hello)" : "an incomplete hello");
    }
    pending_.clear();
  }

  Result drop(Pending* p, bool* done, const char* why) {
    BRAID_WARN("tcp: dropped a connection from %s on the port waiting for %s: %s",
               p->from.c_str(), connectionName(req_).c_str(), why);
    p->fd.reset();
    *done = true;
    return Result::success();
  }

  transports::ConnectRequest req_;
  UniqueFd listen_;
  uint64_t nonce_;
  std::vector<UniqueFd> data_;  // the sender's sockets, by socket index
  size_t connected_ = 0;        // of data_, valid
  Blob blob_;
  std::vector<Pending> pending_;
};

class TcpTransport final : public transports::Transport {
 public:
  const char* name() const override { return "tcp"; }

  bool canConnect(const PeerInfo&, const PeerInfo&) const override { return true; }

  Result listen(const transports::ConnectRequest& req, std::unique_ptr<transports::RecvEndpoint>* out) override {
    BRAID_TRY(checkGeometry(req));
    sockaddr_storage addr;
    BRAID_TRY(peerAddress(req.self, &addr));
    // The receiver decides the socket count; the sender follows the blob.
    const int nsockets = tcpSocketsFor(req);
    UniqueFd fd;
    sockaddr_storage bound;
    BRAID_TRY(listenOn(addr, bufferBytesFor(req, nsockets), &fd, &bound)
                  .context("listening for " + connectionName(req)));
    *out = std::make_unique<TcpEndpoint>(req, std::move(fd), bound, common::randomU64(), nsockets);
    return Result::success();
  }

  Result connect(const transports::ConnectRequest& req, const Blob& blob,
                 std::unique_ptr<transports::SendConnection>* out) override {
    BRAID_TRY(checkGeometry(req));
    const std::string peer = connectionName(req);
    tcp::BlobContents c;
    BRAID_TRY(tcp::decodeBlob(blob, peer, &c));
    if (c.slotBytes != req.slotBytes || c.nslots != req.nslots)
      return fail(ncclInternalError, "%s listens with %d x %llu byte slots but this rank "
                  "connects with %d x %zu: ranks disagree on the buffer size",
                  peer.c_str(), c.nslots, static_cast<unsigned long long>(c.slotBytes),
                  req.nslots, req.slotBytes);
    const sockaddr_storage& addr = c.addr;
    const int mine = tcpSocketsFor(req);
    if (mine != c.nsockets)
      BRAID_INFO(kLogNet, "tcp: %s asks for %d sockets per connection, this rank's setting "
                 "is %d: the receiver decides, using %d", peer.c_str(), c.nsockets, mine,
                 c.nsockets);
    std::vector<UniqueFd> fds(static_cast<size_t>(c.nsockets));
    for (int i = 0; i < c.nsockets; ++i) {
      BRAID_TRY(connectTo(addr, req, bufferBytesFor(req, c.nsockets), peer, &fds[i]));
      setNoDelay(fds[i].get());
      Hello hello{kHelloMagic, c.nonce, req.slotBytes, req.self.rank, req.channel,
                  req.nslots, c.nsockets, i, 0};
      BRAID_TRY(sendAll(fds[i].get(), &hello, sizeof(hello), req, peer));
    }
    auto conn = std::make_unique<TcpSend>(std::move(fds), req.slotBytes, req.nslots, peer);
    if (!conn->allocated())
      return fail(ncclSystemError, "cannot allocate %d x %zu bytes of TCP send slots for %s",
                  req.nslots, req.slotBytes, peer.c_str());
    BRAID_INFO(kLogNet, "tcp: connected to %s at %s with %d socket(s)", peer.c_str(),
               addrToString(addr).c_str(), c.nsockets);
    *out = std::move(conn);
    return Result::success();
  }
};

}  // namespace

std::unique_ptr<transports::Transport> makeTcpTransport() { return std::make_unique<TcpTransport>(); }

}  // namespace braid::tcp
