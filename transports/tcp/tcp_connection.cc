#include "transports/tcp/tcp_connection.h"

#include <nccl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/log.h"

namespace braid {

namespace {

// Frames gathered into one sendmsg(): enough to drain a FIFO of small slots in
// one call, well under IOV_MAX.
constexpr int kMaxIov = 64;

size_t slotStride(size_t slotBytes) {
  size_t align = slotBytes >= 4096 ? 4096 : 64;
  return (slotBytes + align - 1) / align * align;
}

Result streamError(const std::string& peer, const char* doing, int err) {
  return fail(ncclRemoteError,
              "TCP connection with %s failed while %s: %s; the peer process probably died or "
              "aborted, check its log",
              peer.c_str(), doing, strerror(err));
}

}  // namespace

SlotRing::SlotRing(size_t slotBytes_, int nslots_)
    : slotBytes(slotBytes_), stride(slotStride(slotBytes_)), nslots(static_cast<uint32_t>(nslots_)),
      memory(stride * nslots, 4096) {}

// ---- sender ---------------------------------------------------------------------

TcpSend::TcpSend(UniqueFd fd, size_t slotBytes, int nslots, std::string peer)
    : fd_(std::move(fd)), ring_(slotBytes, nslots), headers_(nslots), peer_(std::move(peer)) {}

void* TcpSend::acquire() {
  if (posted_ - sent_ >= ring_.nslots) return nullptr;
  return ring_.slot(posted_);
}

void TcpSend::post(size_t bytes) {
  headers_[posted_ % ring_.nslots] = FrameHeader{bytes, posted_};
  ++posted_;
}

Result TcpSend::progress() {
  if (!error_.ok()) return error_;
  bool drained = false;
  while (sent_ < posted_ && !drained) {
    Result r = writeSome(&drained);
    if (!r.ok()) {
      error_ = r;
      return r;
    }
  }
  return Result::success();
}

Result TcpSend::writeSome(bool* socketFull) {
  iovec iov[kMaxIov];
  int n = 0;
  size_t want = 0;
  size_t skip = frameOffset_;
  for (uint64_t k = sent_; k < posted_ && n + 2 <= kMaxIov; ++k) {
    FrameHeader* h = &headers_[k % ring_.nslots];
    size_t hskip = std::min(skip, sizeof(FrameHeader));
    if (hskip < sizeof(FrameHeader))
      iov[n++] = {reinterpret_cast<uint8_t*>(h) + hskip, sizeof(FrameHeader) - hskip};
    size_t pskip = skip - hskip;
    if (h->bytes > pskip) iov[n++] = {ring_.slot(k) + pskip, h->bytes - pskip};
    want += sizeof(FrameHeader) + h->bytes - skip;
    skip = 0;
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = n;
  ssize_t w = sendmsg(fd_.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w < 0) {
    if (errno == EINTR) return Result::success();
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      *socketFull = true;
      return Result::success();
    }
    return streamError(peer_, "sending", errno);
  }
  // A short write means the socket buffer is full: stop without another
  // syscall that would only say EAGAIN.
  *socketFull = static_cast<size_t>(w) < want;
  size_t left = static_cast<size_t>(w);
  while (left > 0) {
    size_t frameLeft = sizeof(FrameHeader) + headers_[sent_ % ring_.nslots].bytes - frameOffset_;
    if (left < frameLeft) {
      frameOffset_ += left;
      break;
    }
    left -= frameLeft;
    frameOffset_ = 0;
    ++sent_;
  }
  return Result::success();
}

// ---- receiver -------------------------------------------------------------------

TcpRecv::TcpRecv(UniqueFd fd, size_t slotBytes, int nslots, std::string peer)
    : fd_(std::move(fd)), ring_(slotBytes, nslots), sizes_(nslots), peer_(std::move(peer)) {}

const void* TcpRecv::peek(size_t* bytes) {
  if (released_ == received_) return nullptr;
  *bytes = sizes_[released_ % ring_.nslots];
  return ring_.slot(released_);
}

void TcpRecv::release() {
  if (released_ < received_) ++released_;
}

Result TcpRecv::progress() {
  if (!error_.ok()) return error_;
  bool drained = peerClosed_;
  // Read only into free slots: a full ring leaves data in the kernel, which
  // pushes back on the sender through TCP flow control.
  while (!drained && received_ - released_ < ring_.nslots) {
    Result r = (!inPayload_ && headerGot_ == sizeof(FrameHeader)) ? headerComplete()
                                                                   : readSome(&drained);
    if (!r.ok()) {
      error_ = r;
      return r;
    }
  }
  // Slots that arrived before a close are still good; the close becomes an
  // error once they are consumed and the caller still asks for more.
  if (peerClosed_ && received_ == released_) {
    error_ = fail(ncclRemoteError, "%s closed its TCP connection while this rank expected "
                  "data; the peer process probably exited or died, check its log",
                  peer_.c_str());
    return error_;
  }
  return Result::success();
}

Result TcpRecv::headerComplete() {
  // Sizes come off the wire: check them before they bound any write.
  tcp::FrameHeader checked{};
  BRAID_TRY(tcp::decodeFrameHeader(&header_, sizeof header_, ring_.slotBytes, received_, peer_, &checked));
  headerGot_ = 0;
  if (header_.bytes == 0) {
    sizes_[received_ % ring_.nslots] = 0;
    ++received_;
  } else {
    inPayload_ = true;
    payloadGot_ = 0;
  }
  return Result::success();
}

Result TcpRecv::readSome(bool* drained) {
  iovec iov[2];
  int n = 0;
  size_t payloadBytes = header_.bytes;
  if (inPayload_) {
    // Payload straight into the slot, plus the next frame's header in the same call.
    iov[n++] = {ring_.slot(received_) + payloadGot_, payloadBytes - payloadGot_};
    iov[n++] = {&header_, sizeof(FrameHeader)};
  } else {
    iov[n++] = {reinterpret_cast<uint8_t*>(&header_) + headerGot_, sizeof(FrameHeader) - headerGot_};
  }
  size_t want = iov[0].iov_len + (n > 1 ? iov[1].iov_len : 0);
  ssize_t r = readv(fd_.get(), iov, n);
  if (r < 0) {
    if (errno == EINTR) return Result::success();
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      *drained = true;
      return Result::success();
    }
    return streamError(peer_, "receiving", errno);
  }
  if (r == 0) {
    if (inPayload_ || headerGot_ > 0)
      return fail(ncclRemoteError, "%s closed its TCP connection in the middle of a slot; the "
                  "peer process probably died, check its log", peer_.c_str());
    peerClosed_ = true;
    *drained = true;
    return Result::success();
  }
  *drained = static_cast<size_t>(r) < want;
  size_t got = static_cast<size_t>(r);
  if (inPayload_) {
    size_t take = std::min(got, payloadBytes - payloadGot_);
    payloadGot_ += take;
    got -= take;
    if (payloadGot_ < payloadBytes) return Result::success();
    sizes_[received_ % ring_.nslots] = payloadBytes;
    ++received_;
    inPayload_ = false;
    headerGot_ = got;  // the rest landed in header_
  } else {
    headerGot_ += got;
  }
  return Result::success();
}

}  // namespace braid
