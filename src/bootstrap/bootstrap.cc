// Bootstrap::create and the point-to-point message layer between ranks.
//
// Each rank listens on one socket. send() writes over one persistent outgoing
// connection per peer; recv() drains the listening socket and every accepted
// connection into per-(peer, tag) queues until the wanted message is there.
// While a send waits for socket space it drains incoming data too, so two ranks
// sending large messages to each other cannot deadlock.
#include "bootstrap/bootstrap.h"

#include <poll.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <vector>

#include "base/diagnosis_signal.h"
#include "base/log.h"
#include "base/socket.h"
#include "bootstrap/checkin.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/root.h"
#include "bootstrap/wire.h"

namespace braid::bootstrap {

namespace {

// Connections that have not said who they are; beyond this the oldest is dropped.
constexpr size_t kMaxStrangers = 64;

struct InConn {
  UniqueFd sock;
  sockaddr_storage from{};
  int peer = -1;  // known once the ConnHeader is read
  ConnHeader hello{};
  size_t helloGot = 0;
  FrameHeader frame{};
  size_t frameGot = 0;
  bool inPayload = false;
  std::vector<uint8_t> payload;
  size_t payloadGot = 0;
};

class BootstrapImpl final : public Bootstrap {
 public:
  BootstrapImpl(int rank, int nranks, uint64_t magic, UniqueFd listener,
                const sockaddr_storage& listenAddr, std::vector<sockaddr_storage> peers)
      : rank_(rank),
        nranks_(nranks),
        magic_(magic),
        listener_(std::move(listener)),
        local_(listenAddr),
        listen_(listenAddr),
        peers_(std::move(peers)),
        outgoing_(nranks),
        sendFailure_(nranks),
        recvFailure_(nranks),
        peerClosed_(nranks, false),
        connectedFrom_(nranks, false),
        sendTimeout_(std::chrono::seconds(bootstrapTimeoutSeconds())) {
    setAddrPort(&local_, 0);
  }

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  const sockaddr_storage& localAddress() const override { return local_; }
  const sockaddr_storage& listenAddress() const override { return listen_; }

  Result send(int peer, uint32_t tag, const void* data, size_t bytes) override {
    return sendUntil(peer, tag, data, bytes, Clock::now() + sendTimeout_);
  }
  Result recv(int peer, uint32_t tag, void* data, size_t bytes, Deadline deadline) override;
  Result waitFor(int peer, uint32_t tag, int timeoutMs, bool* ready) override;
  Result allGather(void* data, size_t bytes, Deadline deadline) override;
  Result barrier(Deadline deadline) override;
  void abort() override { aborted_.store(true); }
  void notifyFailure(const std::string& text, int lostRank, Deadline deadline) override;
  bool pollFailure(std::string* text) override;
  std::vector<std::string> failureNotices(int peer) override;

 private:
  Result sendUntil(int peer, uint32_t tag, const void* data, size_t bytes, Deadline deadline);
  Result checkPeer(const char* op, int peer, size_t bytes) const;
  Result abortedError(const char* op, int peer, uint32_t tag) const;
  // Waits up to timeoutMs for incoming data (and for `writeFd` to be writable
  // when >= 0), then accepts and reads whatever is there.
  Result progress(int timeoutMs, int writeFd, bool* writable);
  void acceptAll();
  bool readConn(InConn& c);  // false: drop the connection
  bool identify(InConn& c);
  bool onFrameHeader(InConn& c);
  void onClosed(InConn& c, ssize_t n);
  void deliver(int peer, uint32_t tag, std::vector<uint8_t> payload);

  const int rank_;
  const int nranks_;
  const uint64_t magic_;
  UniqueFd listener_;
  sockaddr_storage local_;   // interface address, port 0
  sockaddr_storage listen_;  // with the bootstrap's port
  std::vector<sockaddr_storage> peers_;
  std::vector<UniqueFd> outgoing_;
  std::vector<std::unique_ptr<InConn>> incoming_;
  std::map<std::pair<int, uint32_t>, std::deque<std::vector<uint8_t>>> queues_;
  std::vector<std::string> sendFailure_;  // non-empty: the link to that peer is broken
  std::vector<std::string> recvFailure_;
  std::vector<bool> peerClosed_;     // the peer closed its connection cleanly
  std::vector<bool> connectedFrom_;  // an identified connection from the peer is open
  std::chrono::seconds sendTimeout_;
  std::atomic<bool> aborted_{false};
  std::vector<pollfd> fds_;  // reused by progress()
};

Result BootstrapImpl::checkPeer(const char* op, int peer, size_t bytes) const {
  if (peer < 0 || peer >= nranks_)
    return fail(ncclInvalidArgument, "bootstrap %s on rank %d: peer %d is outside [0, %d)", op,
                rank_, peer, nranks_);
  if (bytes > kMaxMessageBytes)
    return fail(ncclInvalidArgument, "bootstrap %s on rank %d: %zu bytes exceeds the %llu-byte limit",
                op, rank_, bytes, (unsigned long long)kMaxMessageBytes);
  return Result::success();
}

Result BootstrapImpl::abortedError(const char* op, int peer, uint32_t tag) const {
  return fail(ncclRemoteError, "bootstrap %s on rank %d (peer %d, tag %#x) was aborted", op, rank_,
              peer, tag);
}

Result BootstrapImpl::sendUntil(int peer, uint32_t tag, const void* data, size_t bytes,
                                Deadline deadline) {
  BRAID_TRY(checkPeer("send", peer, bytes));
  if (aborted_.load()) return abortedError("send", peer, tag);
  if (peer == rank_) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    deliver(peer, tag, std::vector<uint8_t>(p, p + bytes));
    return Result::success();
  }
  if (!sendFailure_[peer].empty()) return Result(ncclRemoteError, sendFailure_[peer]);

  ConnHeader conn{magic_, rank_, 0};
  bool fresh = !outgoing_[peer].valid();
  if (fresh) {
    Result r = connectWithRetry(peers_[peer], deadline, &aborted_, &outgoing_[peer]);
    if (!r.ok())
      return Result(ncclRemoteError, r.message())
          .context("rank " + std::to_string(rank_) + " cannot open a bootstrap connection to rank " +
                   std::to_string(peer));
  }
  FrameHeader frame{frameCheck(magic_), tag, bytes};
  iovec iov[3];
  int niov = 0;
  if (fresh) iov[niov++] = {&conn, sizeof(conn)};
  iov[niov++] = {&frame, sizeof(frame)};
  if (bytes) iov[niov++] = {const_cast<void*>(data), bytes};
  size_t total = 0;
  for (int i = 0; i < niov; ++i) total += iov[i].iov_len;

  const UniqueFd& s = outgoing_[peer];
  size_t done = 0;
  int first = 0;
  std::string error;
  while (done < total) {
    msghdr msg{};
    msg.msg_iov = iov + first;
    msg.msg_iovlen = niov - first;
    ssize_t n = ::sendmsg(s.get(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      size_t left = static_cast<size_t>(n);
      while (first < niov && left >= iov[first].iov_len) left -= iov[first++].iov_len;
      if (first < niov) {
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      error = std::string("the connection failed: ") + strerror(errno);
      break;
    }
    if (aborted_.load()) {
      error = "aborted";
      break;
    }
    if (Clock::now() >= deadline) {
      error = "timed out: rank " + std::to_string(peer) +
              " is not reading its bootstrap messages (hung, or busy outside braid?)";
      break;
    }
    bool writable = false;
    BRAID_TRY(progress(msUntil(deadline), s.get(), &writable));
  }
  if (error.empty()) return Result::success();
  char head[128];
  snprintf(head, sizeof(head), "rank %d could not send %zu bytes (tag %#x) to rank %d: ", rank_,
           bytes, tag, peer);
  std::string what = head + error;
  if (done > 0) {
    // Part of a frame is on the wire: the stream can never be framed again.
    sendFailure_[peer] = what + " (the connection was closed mid-message)";
    outgoing_[peer].reset();
  }
  return Result(ncclRemoteError, what);
}

Result BootstrapImpl::recv(int peer, uint32_t tag, void* data, size_t bytes, Deadline deadline) {
  BRAID_TRY(checkPeer("recv", peer, bytes));
  WaitDiagnosis diagnosis;
  for (;;) {
    diagnosis.poll([&] {
      char text[160];
      snprintf(text, sizeof text, "rank %d of %d: waiting for a bootstrap message from rank %d (tag %#x, %zu bytes)",
               rank_, nranks_, peer, tag, bytes);
      return std::string(text);
    });
    if (aborted_.load()) return abortedError("recv", peer, tag);
    auto it = queues_.find({peer, tag});
    if (it != queues_.end()) {
      std::vector<uint8_t> msg = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) queues_.erase(it);
      if (msg.size() != bytes)
        return fail(ncclInvalidUsage,
                    "rank %d expected %zu bytes from rank %d (tag %#x) but rank %d sent %zu "
                    "bytes: the ranks disagree about this operation",
                    rank_, bytes, peer, tag, peer, msg.size());
      if (bytes) memcpy(data, msg.data(), bytes);
      return Result::success();
    }
    if (peer == rank_)
      return fail(ncclInvalidUsage, "rank %d waits for a message from itself (tag %#x) that it never sent",
                  rank_, tag);
    if (!recvFailure_[peer].empty()) return Result(ncclRemoteError, recvFailure_[peer]);
    if (peerClosed_[peer])
      return fail(ncclRemoteError,
                  "rank %d closed its bootstrap connection (it exited, failed or destroyed its "
                  "communicator) before sending the message rank %d waits for (tag %#x, %zu bytes)",
                  peer, rank_, tag, bytes);
    if (Clock::now() >= deadline)
      return fail(ncclRemoteError,
                  "rank %d timed out waiting for a bootstrap message from rank %d (tag %#x, %zu "
                  "bytes): rank %d is slow, hung, dead, or running a different operation",
                  rank_, peer, tag, bytes, peer);
    BRAID_TRY(progress(msUntil(deadline), -1, nullptr));
  }
}

Result BootstrapImpl::waitFor(int peer, uint32_t tag, int timeoutMs, bool* ready) {
  BRAID_TRY(checkPeer("wait", peer, 0));
  const Deadline until = Clock::now() + std::chrono::milliseconds(timeoutMs);
  for (;;) {
    const auto it = queues_.find({peer, tag});
    *ready = (it != queues_.end() && !it->second.empty()) || aborted_.load() || peer == rank_ ||
             !recvFailure_[peer].empty() || peerClosed_[peer];
    if (*ready || Clock::now() >= until) return Result::success();
    BRAID_TRY(progress(msUntil(until), -1, nullptr));
  }
}

void BootstrapImpl::notifyFailure(const std::string& text, int lostRank, Deadline deadline) {
  const std::string note = "rank " + std::to_string(rank_) + " reports: " + text;
  for (int peer = 0; peer < nranks_; ++peer) {
    if (peer == rank_ || peer == lostRank || !sendFailure_[peer].empty()) continue;
    Result r = sendUntil(peer, kTagFailure, note.data(), note.size(), deadline);
    if (!r.ok()) BRAID_WARN("rank %d: failure notice to rank %d not sent: %s", rank_, peer, r.message().c_str());
  }
}

bool BootstrapImpl::pollFailure(std::string* text) {
  if (!progress(0, -1, nullptr).ok()) return false;
  for (auto it = queues_.begin(); it != queues_.end(); ++it) {
    if (it->first.second != kTagFailure || it->second.empty()) continue;
    const std::vector<uint8_t>& msg = it->second.front();
    text->assign(msg.begin(), msg.end());
    return true;
  }
  return false;
}

std::vector<std::string> BootstrapImpl::failureNotices(int peer) {
  std::vector<std::string> out;
  (void)progress(0, -1, nullptr);
  for (const auto& [key, queue] : queues_)
    if (key.second == kTagFailure && (peer < 0 || key.first == peer))
      for (const std::vector<uint8_t>& msg : queue) out.emplace_back(msg.begin(), msg.end());
  return out;
}

Result BootstrapImpl::allGather(void* data, size_t bytes, Deadline deadline) {
  if (bytes > kMaxMessageBytes) return checkPeer("allGather", 0, bytes);
  char* base = static_cast<char*>(data);
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  // Ring: at step s forward the block that came from s ranks behind us.
  for (int s = 0; s < nranks_ - 1; ++s) {
    int sendBlock = (rank_ - s + nranks_) % nranks_;
    int recvBlock = (rank_ - s - 1 + nranks_) % nranks_;
    Result r = sendUntil(next, kTagAllGather, base + size_t(sendBlock) * bytes, bytes, deadline);
    if (r.ok()) r = recv(prev, kTagAllGather, base + size_t(recvBlock) * bytes, bytes, deadline);
    if (!r.ok())
      return r.context("bootstrap allGather step " + std::to_string(s + 1) + "/" +
                       std::to_string(nranks_ - 1));
  }
  return Result::success();
}

Result BootstrapImpl::barrier(Deadline deadline) {
  // Dissemination: after round k every rank has heard, transitively, from 2^(k+1) ranks.
  for (int dist = 1; dist < nranks_; dist <<= 1) {
    Result r = sendUntil((rank_ + dist) % nranks_, kTagBarrier, nullptr, 0, deadline);
    if (r.ok()) r = recv((rank_ - dist + nranks_) % nranks_, kTagBarrier, nullptr, 0, deadline);
    if (!r.ok()) return r.context("bootstrap barrier");
  }
  return Result::success();
}

Result BootstrapImpl::progress(int timeoutMs, int writeFd, bool* writable) {
  fds_.assign(1, pollfd{listener_.get(), POLLIN, 0});
  for (const auto& c : incoming_) fds_.push_back(pollfd{c->sock.get(), POLLIN, 0});
  if (writeFd >= 0) fds_.push_back(pollfd{writeFd, POLLOUT, 0});
  int n = ::poll(fds_.data(), fds_.size(), timeoutMs);
  if (n < 0) {
    if (errno == EINTR) return Result::success();
    return systemFail("rank %d: poll() on bootstrap sockets failed", rank_);
  }
  if (n == 0) return Result::success();
  if (writeFd >= 0 && writable) *writable = fds_.back().revents != 0;
  for (size_t i = incoming_.size(); i-- > 0;) {
    if (!fds_[i + 1].revents) continue;
    if (!readConn(*incoming_[i])) {
      if (incoming_[i]->peer >= 0) connectedFrom_[incoming_[i]->peer] = false;
      incoming_.erase(incoming_.begin() + static_cast<ptrdiff_t>(i));
    }
  }
  if (fds_[0].revents) {
    acceptAll();
    // What a new connection has already sent is read now, not at some later
    // call: a rank may not use its bootstrap again for a long time.
    for (size_t i = incoming_.size(); i-- > 0;)
      if (incoming_[i]->peer < 0 && !readConn(*incoming_[i])) incoming_.erase(incoming_.begin() + static_cast<ptrdiff_t>(i));
  }
  return Result::success();
}

void BootstrapImpl::acceptAll() {
  for (;;) {
    auto c = std::make_unique<InConn>();
    Result r = acceptOne(listener_, &c->sock, &c->from);
    if (!r.ok()) {
      BRAID_WARN("rank %d: %s", rank_, r.message().c_str());
      return;
    }
    if (!c->sock.valid()) return;
    incoming_.push_back(std::move(c));
    size_t strangers = 0;
    for (const auto& x : incoming_) strangers += x->peer < 0;
    if (strangers <= kMaxStrangers) continue;
    for (size_t i = 0; i < incoming_.size(); ++i) {
      if (incoming_[i]->peer < 0) {
        BRAID_WARN("rank %d: dropped a bootstrap connection from %s that never identified itself "
                   "(too many such connections)",
                   rank_, addrToString(incoming_[i]->from).c_str());
        incoming_.erase(incoming_.begin() + static_cast<ptrdiff_t>(i));
        break;
      }
    }
  }
}

bool BootstrapImpl::readConn(InConn& c) {
  for (;;) {
    char* dst;
    size_t want;
    if (c.peer < 0) {
      dst = reinterpret_cast<char*>(&c.hello) + c.helloGot;
      want = sizeof(c.hello) - c.helloGot;
    } else if (!c.inPayload) {
      dst = reinterpret_cast<char*>(&c.frame) + c.frameGot;
      want = sizeof(c.frame) - c.frameGot;
    } else {
      dst = reinterpret_cast<char*>(c.payload.data()) + c.payloadGot;
      want = c.payload.size() - c.payloadGot;
    }
    ssize_t n = readSome(c.sock, dst, want);
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) {
      onClosed(c, n);
      return false;
    }
    if (c.peer < 0) {
      c.helloGot += static_cast<size_t>(n);
      if (c.helloGot == sizeof(c.hello) && !identify(c)) return false;
    } else if (!c.inPayload) {
      c.frameGot += static_cast<size_t>(n);
      if (c.frameGot == sizeof(c.frame) && !onFrameHeader(c)) return false;
    } else {
      c.payloadGot += static_cast<size_t>(n);
      if (c.payloadGot == c.payload.size()) {
        deliver(c.peer, c.frame.tag, std::move(c.payload));
        c.payload = {};
        c.inPayload = false;
        c.frameGot = 0;
      }
    }
  }
}

bool BootstrapImpl::identify(InConn& c) {
  ConnHeader h{};
  Result r = decodeConnHeader(&c.hello, sizeof c.hello, magic_, rank_, nranks_, &h);
  if (r.ok() && connectedFrom_[h.rank]) r = fail(ncclRemoteError, "rank %d is already connected", h.rank);
  if (!r.ok()) {
    BRAID_WARN("rank %d: dropped a bootstrap connection from %s: %s", rank_, addrToString(c.from).c_str(),
               r.message().c_str());
    return false;
  }
  c.peer = h.rank;
  connectedFrom_[c.peer] = true;
  peerClosed_[c.peer] = false;
  return true;
}

bool BootstrapImpl::onFrameHeader(InConn& c) {
  FrameHeader f{};
  Result r = decodeFrameHeader(&c.frame, sizeof c.frame, magic_, &f);
  if (!r.ok()) {
    const std::string what = "rank " + std::to_string(rank_) + " received a corrupt bootstrap message from rank " +
                             std::to_string(c.peer) + " (" + r.message() + "); the connection was closed";
    BRAID_WARN("%s", what.c_str());
    recvFailure_[c.peer] = what;
    return false;
  }
  if (f.size == 0) {
    deliver(c.peer, f.tag, {});
    c.frameGot = 0;
    return true;
  }
  c.payload.resize(f.size);
  c.payloadGot = 0;
  c.inPayload = true;
  return true;
}

void BootstrapImpl::onClosed(InConn& c, ssize_t n) {
  std::string cause = n == 0 ? "closed" : std::string("failed: ") + strerror(errno);
  if (c.peer < 0) {
    BRAID_WARN("rank %d: dropped a bootstrap connection from %s that %s after %zu bytes without "
               "identifying itself (not a rank of this job?)",
               rank_, addrToString(c.from).c_str(), cause.c_str(), c.helloGot);
    return;
  }
  if (n == 0 && c.frameGot == 0 && !c.inPayload) {
    peerClosed_[c.peer] = true;
    BRAID_TRACE(kLogBootstrap, "rank %d: rank %d closed its bootstrap connection", rank_, c.peer);
    return;
  }
  char what[256];
  if (c.inPayload)
    snprintf(what, sizeof(what),
             "rank %d's bootstrap connection to rank %d %s in the middle of a message (tag %#x, "
             "%zu of %zu bytes arrived): rank %d probably died",
             c.peer, rank_, cause.c_str(), c.frame.tag, c.payloadGot, c.payload.size(), c.peer);
  else
    snprintf(what, sizeof(what),
             "rank %d's bootstrap connection to rank %d %s in the middle of a message header: "
             "rank %d probably died",
             c.peer, rank_, cause.c_str(), c.peer);
  recvFailure_[c.peer] = what;
  BRAID_WARN("%s", what);
}

void BootstrapImpl::deliver(int peer, uint32_t tag, std::vector<uint8_t> payload) {
  queues_[{peer, tag}].push_back(std::move(payload));
}

}  // namespace

// A mismatch notice travels as RS<kind><sender> <fingerprint>RS<text> (RS:
// the record separator, which no rank's text contains), after the "rank N
// reports: " that notifyFailure puts first.
constexpr char kNoticeMark = '\x1e';

std::string encodeMismatchNotice(const MismatchNotice& n) {
  return std::string(1, kNoticeMark) + char(n.kind) + std::to_string(n.sender) + " " + std::to_string(n.reporter) + " " +
         std::to_string(n.fingerprint) + " " + std::to_string(n.operation) + kNoticeMark + n.text;
}

bool parseMismatchNotice(const std::string& notice, MismatchNotice* out) {
  const size_t start = notice.find(kNoticeMark);
  if (start == std::string::npos || start + 1 >= notice.size()) return false;
  const size_t end = notice.find(kNoticeMark, start + 1);
  if (end == std::string::npos) return false;
  const char kind = notice[start + 1];
  if (kind != MismatchNotice::Received && kind != MismatchNotice::Paired) return false;
  int sender = -1, reporter = -1;
  unsigned long fingerprint = 0;
  unsigned long long operation = 0;
  const std::string fields = notice.substr(start + 2, end - start - 2);
  if (sscanf(fields.c_str(), "%d %d %lu %llu", &sender, &reporter, &fingerprint, &operation) != 4) return false;
  out->operation = operation;
  out->kind = MismatchNotice::Kind(kind);
  out->sender = sender;
  out->reporter = reporter;
  out->fingerprint = uint32_t(fingerprint);
  out->text = notice.substr(end + 1);
  return true;
}

std::string mismatchText(const MismatchNotice& n) {
  if (n.kind == MismatchNotice::Paired) return n.text;
  return n.text + ", but received a message of another call from rank " + std::to_string(n.sender) +
         " (the ranks called different collectives, counts, datatypes, reductions, roots or peers, or in another "
         "order)";
}

Result failureNoticeError(int rank, const std::string& notice) {
  MismatchNotice n;
  if (parseMismatchNotice(notice, &n)) return fail(ncclInvalidUsage, "rank %d: %s", rank, mismatchText(n).c_str());
  return fail(ncclRemoteError, "rank %d: the job lost a rank; %s", rank, notice.c_str());
}

Result Bootstrap::create(const ncclUniqueId& id, int rank, int nranks, Deadline deadline,
                         std::unique_ptr<Bootstrap>* out) {
  if (nranks <= 0 || nranks > kMaxRanks)
    return fail(ncclInvalidArgument, "bootstrap: nranks=%d is outside [1, %d]", nranks, kMaxRanks);
  if (rank < 0 || rank >= nranks)
    return fail(ncclInvalidArgument, "bootstrap: rank %d is outside [0, %d)", rank, nranks);
  UniqueIdContents c;
  BRAID_TRY(decodeUniqueId(id, &c));
  sockaddr_storage root;
  (void)unpackAddr(c.root, &root);  // validated by decodeUniqueId

  RootHandle rootHandle;
  if (!(c.flags & kIdRootRunning) && rank == 0) {
    // NCCL_COMM_ID: nobody started a root; rank 0 runs it at the agreed address.
    UniqueFd listener;
    sockaddr_storage bound;
    Result r = listenOn(root, true, &listener, &bound);
    if (!r.ok())
      return r.context("rank 0 cannot run the bootstrap root at " + addrToString(root) +
                       " (NCCL_COMM_ID must name an address of rank 0's host and a free port)");
    BRAID_TRY(startRoot(std::move(listener), bound, c.magic, nranks, &rootHandle));
  }

  sockaddr_storage local;
  UniqueFd listener;
  Result r = chooseLocalAddress(&root, &local);
  if (r.ok()) r = listenOn(local, false, &listener, &local);
  std::vector<sockaddr_storage> table;
  if (r.ok()) r = checkIn(root, c.magic, rank, nranks, local, deadline, &table);
  if (!r.ok()) {
    rootHandle.stop();
    return r;
  }
  *out = std::make_unique<BootstrapImpl>(rank, nranks, c.magic, std::move(listener), local,
                                         std::move(table));
  BRAID_INFO(kLogBootstrap | kLogInit, "bootstrap: rank %d of %d listening at %s", rank, nranks,
             addrToString(local).c_str());
  return Result::success();
}

}  // namespace braid::bootstrap
