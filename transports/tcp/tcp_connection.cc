#include "transports/tcp/tcp_connection.h"

#include <nccl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace braid::tcp {

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

Result closedMidSlot(const std::string& peer) {
  return fail(ncclRemoteError, "%s closed its TCP connection in the middle of a slot; the "
              "peer process probably died, check its log", peer.c_str());
}

}  // namespace

SlotRing::SlotRing(size_t slotBytes_, int nslots_)
    : slotBytes(slotBytes_), stride(slotStride(slotBytes_)), nslots(static_cast<uint32_t>(nslots_)),
      memory(stride * nslots, 4096), base(memory.data()) {}

bool SlotRing::adopt(const transports::SlotMemory& slots) {
  if (slots.base == nullptr || slots.nslots != nslots || slots.stride < slotBytes) return false;
  base = slots.base;
  stride = slots.stride;
  first = slots.first;
  memory = AlignedBuffer();
  return true;
}

// ---- sender ---------------------------------------------------------------------

TcpSend::TcpSend(std::vector<UniqueFd> fds, size_t slotBytes, int nslots, std::string peer)
    : ring_(slotBytes, nslots), headers_(static_cast<size_t>(nslots)), sources_(static_cast<size_t>(nslots)),
      peer_(std::move(peer)) {
  streams_.resize(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) streams_[i].fd = std::move(fds[i]);
}

void* TcpSend::acquire() {
  if (posted_ - sent_ >= ring_.nslots) return nullptr;
  return ring_.slot(posted_);
}

void TcpSend::post(size_t bytes, uint32_t mark, const void* from) {
  headers_[posted_ % ring_.nslots] = FrameHeader{uint32_t(bytes), mark, posted_};
  sources_[posted_ % ring_.nslots] = from != nullptr ? static_cast<const uint8_t*>(from) : ring_.slot(posted_);
  ++posted_;
}

void TcpSend::detach(uint64_t k) {
  if (k >= posted_) return;
  bool left = true;
  for (const Stream& s : streams_) left = left && s.done > k;
  const uint8_t*& from = sources_[k % ring_.nslots];
  if (left || from == ring_.slot(k)) return;
  // Whole: the stripes' offsets stay those of the slot, what was written too.
  memcpy(ring_.slot(k), from, headers_[k % ring_.nslots].bytes);
  from = ring_.slot(k);
}

bool TcpSend::carries(int index, uint64_t seq) const {
  const int n = static_cast<int>(streams_.size());
  return index < tcp::stripeCount(headers_[seq % ring_.nslots].bytes, n);
}

size_t TcpSend::frameBytes(int index, uint64_t seq) const {
  const int n = static_cast<int>(streams_.size());
  return sizeof(FrameHeader) + tcp::stripeOf(headers_[seq % ring_.nslots].bytes, n, index).bytes;
}

Result TcpSend::progress() {
  if (!error_.ok()) return error_;
  uint64_t sent = posted_;
  for (int i = 0; i < static_cast<int>(streams_.size()); ++i) {
    bool full = false;
    advance(i, 0);
    while (streams_[i].done < posted_ && !full) {
      Result r = writeSome(i, &full);
      if (!r.ok()) {
        error_ = r;
        return r;
      }
    }
    sent = std::min(sent, streams_[i].done);
  }
  sent_ = sent;
  return Result::success();
}

// Moves socket `index` past `written` more bytes and past the slots it has no
// stripe of.
void TcpSend::advance(int index, size_t written) {
  Stream& s = streams_[index];
  while (s.done < posted_) {
    if (!carries(index, s.done)) {
      ++s.done;
      continue;
    }
    size_t frameLeft = frameBytes(index, s.done) - s.frameOffset;
    if (written < frameLeft) {
      s.frameOffset += written;
      return;
    }
    written -= frameLeft;
    s.frameOffset = 0;
    ++s.done;
  }
}

Result TcpSend::writeSome(int index, bool* socketFull) {
  Stream& s = streams_[index];
  const int nsockets = static_cast<int>(streams_.size());
  iovec iov[kMaxIov];
  int n = 0;
  size_t want = 0;
  size_t skip = s.frameOffset;
  for (uint64_t k = s.done; k < posted_ && n + 2 <= kMaxIov; ++k) {
    if (!carries(index, k)) continue;
    FrameHeader* h = &headers_[k % ring_.nslots];
    tcp::Stripe stripe = tcp::stripeOf(h->bytes, nsockets, index);
    size_t hskip = std::min(skip, sizeof(FrameHeader));
    if (hskip < sizeof(FrameHeader))
      iov[n++] = {reinterpret_cast<uint8_t*>(h) + hskip, sizeof(FrameHeader) - hskip};
    size_t pskip = skip - hskip;
    if (stripe.bytes > pskip)
      iov[n++] = {const_cast<uint8_t*>(sources_[k % ring_.nslots]) + stripe.offset + pskip, stripe.bytes - pskip};
    want += sizeof(FrameHeader) + stripe.bytes - skip;
    skip = 0;
  }
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = n;
  ssize_t w = sendmsg(s.fd.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
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
  advance(index, static_cast<size_t>(w));
  return Result::success();
}

// ---- receiver -------------------------------------------------------------------

TcpRecv::TcpRecv(std::vector<UniqueFd> fds, size_t slotBytes, int nslots, std::string peer)
    : ring_(slotBytes, nslots), arrived_(nslots), payloads_(nslots), peer_(std::move(peer)) {
  streams_.resize(fds.size());
  for (size_t i = 0; i < fds.size(); ++i) streams_[i].fd = std::move(fds[i]);
}

const void* TcpRecv::peek(size_t* bytes, uint32_t* mark) {
  return released_ == received_ ? nullptr : arrived(released_, bytes, mark);
}

void TcpRecv::release() {
  if (released_ < received_) ++released_;
}

const void* TcpRecv::arrived(uint64_t k, size_t* bytes, uint32_t* mark) {
  if (k < released_ || k >= received_) return nullptr;
  const FrameHeader& h = arrived_[k % ring_.nslots];
  *bytes = h.bytes;
  if (mark) *mark = h.mark;
  return payloads_[k % ring_.nslots];
}

bool TcpRecv::receiveInto(uint64_t k, void* dst, size_t bytes) {
  destinations_.push_back({k, static_cast<uint8_t*>(dst), bytes});
  return true;
}

Result TcpRecv::progress() {
  if (!error_.ok()) return error_;
  // Bit i: socket i has nothing more to read in this call.
  uint64_t drained = peerClosed_ ? 1 : 0;
  // Read only into free slots: a full ring leaves data in the kernel, which
  // pushes back on the sender through TCP flow control.
  while (received_ - released_ < ring_.nslots) {
    bool moved = false;
    Result r = step(&drained, &moved);
    if (!r.ok()) {
      error_ = r;
      return r;
    }
    if (!moved) break;
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

// One move towards completing slot `received_`: its size from socket 0, then
// every socket's stripe. Only slot `received_` is read, so a socket's bytes
// of later slots wait in the kernel.
Result TcpRecv::step(uint64_t* drained, bool* moved) {
  if (!sized_) {
    if (streams_[0].headerGot == sizeof(FrameHeader)) {
      *moved = true;
      return startSlot();
    }
    if (*drained & 1) return Result::success();
    return readStream(0, drained, moved);
  }
  bool complete = true;
  for (int i = 0; i < stripes_; ++i) {
    if (partDone(i)) continue;
    complete = false;
    if (!(*drained >> i & 1)) BRAID_TRY(readStream(i, drained, moved));
  }
  if (complete) {
    finishSlot();
    *moved = true;
  }
  return Result::success();
}

Result TcpRecv::startSlot() {
  // Sizes come off the wire: check them before they bound any write.
  FrameHeader h{};
  BRAID_TRY(tcp::decodeFrameHeader(&streams_[0].header, sizeof(FrameHeader), ring_.slotBytes,
                                   received_, peer_, &h));
  sized_ = true;
  slotSize_ = h.bytes;
  slotMark_ = h.mark;
  // Where its bytes go: a destination asked for this slot with its size, or
  // the slot. Decided before any of them is read.
  while (!destinations_.empty() && destinations_.front().slot < received_) destinations_.pop_front();
  uint8_t*& payload = payloads_[received_ % ring_.nslots];
  payload = ring_.slot(received_);
  if (!destinations_.empty() && destinations_.front().slot == received_) {
    if (destinations_.front().bytes == h.bytes) payload = destinations_.front().at;
    destinations_.pop_front();
  }
  stripes_ = tcp::stripeCount(h.bytes, static_cast<int>(streams_.size()));
  for (Stream& s : streams_) s.headerGot = s.payloadGot = 0;
  return Result::success();
}

void TcpRecv::finishSlot() {
  arrived_[received_ % ring_.nslots] = FrameHeader{uint32_t(slotSize_), slotMark_, received_};
  ++received_;
  sized_ = false;
  // Socket 0 may already hold (part of) the next header: keep its headerGot.
  for (size_t i = 1; i < streams_.size(); ++i) streams_[i].headerGot = streams_[i].payloadGot = 0;
  streams_[0].payloadGot = 0;
}

bool TcpRecv::partDone(int index) const {
  const Stream& s = streams_[index];
  size_t stripe = tcp::stripeOf(slotSize_, static_cast<int>(streams_.size()), index).bytes;
  // Socket 0's header was consumed by startSlot(); what it holds now is the next one.
  bool headerIn = index == 0 || s.headerGot == sizeof(FrameHeader);
  return headerIn && s.payloadGot == stripe;
}

Result TcpRecv::readStream(int index, uint64_t* drained, bool* moved) {
  Stream& s = streams_[index];
  iovec iov[2];
  int n = 0;
  auto* header = reinterpret_cast<uint8_t*>(&s.header);
  if (index == 0 && !sized_) {
    iov[n++] = {header + s.headerGot, sizeof(FrameHeader) - s.headerGot};
  } else {
    tcp::Stripe stripe = tcp::stripeOf(slotSize_, static_cast<int>(streams_.size()), index);
    if (index != 0 && s.headerGot < sizeof(FrameHeader))
      iov[n++] = {header + s.headerGot, sizeof(FrameHeader) - s.headerGot};
    if (s.payloadGot < stripe.bytes)
      iov[n++] = {payloads_[received_ % ring_.nslots] + stripe.offset + s.payloadGot, stripe.bytes - s.payloadGot};
    // Socket 0 always carries the next slot: its header may come in the same call.
    if (index == 0) iov[n++] = {header, sizeof(FrameHeader)};
  }
  size_t want = iov[0].iov_len + (n > 1 ? iov[1].iov_len : 0);
  ssize_t r = readv(s.fd.get(), iov, n);
  if (r < 0) {
    if (errno == EINTR) return Result::success();
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      *drained |= 1ull << index;
      return Result::success();
    }
    return streamError(peer_, "receiving", errno);
  }
  if (r == 0) {
    // Only socket 0 between slots may end cleanly: any other socket is read
    // only while it owes a stripe of the current slot.
    if (index != 0 || sized_ || s.headerGot > 0) return closedMidSlot(peer_);
    peerClosed_ = true;
    *drained |= 1;
    return Result::success();
  }
  *moved = true;
  if (static_cast<size_t>(r) < want) *drained |= 1ull << index;
  return takeBytes(index, static_cast<size_t>(r));
}

// Accounts for `got` bytes that readStream() put where its iovecs pointed.
Result TcpRecv::takeBytes(int index, size_t got) {
  Stream& s = streams_[index];
  if (index == 0 && !sized_) {
    s.headerGot += got;
    return Result::success();
  }
  if (index != 0 && s.headerGot < sizeof(FrameHeader)) {
    size_t take = std::min(got, sizeof(FrameHeader) - s.headerGot);
    s.headerGot += take;
    got -= take;
    if (s.headerGot == sizeof(FrameHeader)) {
      FrameHeader h{};
      BRAID_TRY(tcp::decodeStripeHeader(&s.header, sizeof(FrameHeader), ring_.slotBytes,
                                        received_, slotSize_, peer_, &h));
    }
  }
  size_t stripe = tcp::stripeOf(slotSize_, static_cast<int>(streams_.size()), index).bytes;
  size_t take = std::min(got, stripe - s.payloadGot);
  s.payloadGot += take;
  if (index == 0) s.headerGot = got - take;  // the rest landed in the next header
  return Result::success();
}

}  // namespace braid::tcp
