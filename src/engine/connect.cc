#include "engine/connect.h"

#include <cstring>
#include <thread>

#include "base/diagnosis_signal.h"
#include "base/log.h"
#include "base/process_liveness.h"
#include "engine/call_probe.h"

namespace braid::engine {

namespace {

// What the receiver tells the sender: which transport, and its blob.
struct ConnectMessage {
  uint32_t transport;
  uint32_t length;
  uint8_t blob[504];
};
static_assert(sizeof(ConnectMessage) == 512, "fixed-size bootstrap message");

struct PendingRecv {
  ncclComm* comm;
  int peer;
  int channel;
  std::unique_ptr<transports::RecvEndpoint> endpoint;
};

// What a rank checks while its set-up waits on a peer, besides abort and
// the peer's process: failure notices from other ranks, and calls that differ
// (engine/call_probe.h): it answers probes and, once it has waited a second,
// tells the peer which call it is in.
class SetUpWatch {
 public:
  SetUpWatch(ncclComm* comm, int peer) : comm_(comm), peer_(peer) {}
  Result check() {
    std::string notice;
    if (comm_->bootstrap->pollFailure(&notice)) {
      // The set-up serves calls issued so far (up to opCount).
      for (const std::string& n : comm_->bootstrap->failureNotices())
        if (!concernsALaterCall(comm_, n, comm_->opCount)) return bootstrap::failureNoticeError(comm_->rank, n);
    }
    if (!probed_ && Clock::now() >= probeAt_) {
      probed_ = true;
      sendCallProbe(comm_, peer_);
    }
    Stall stall;
    stall.long_ = probed_;
    stall.waitsOn = [this](int peer) { return peer == peer_; };
    stall.waitingFor = peer_;
    stall.at = currentCallText(comm_, nullptr) + " (setting up its connections)";
    return answerCallProbes(comm_, stall);
  }

 private:
  ncclComm* comm_;
  int peer_;
  Clock::time_point probeAt_ = Clock::now() + std::chrono::seconds(1);
  bool probed_ = false;
};

transports::ConnectRequest makeRequest(ncclComm* comm, int peer, int channel) {
  transports::ConnectRequest req;
  req.self = comm->peers[comm->rank];
  req.peer = comm->peers[peer];
  req.channel = channel;
  req.slotBytes = channel == schedule::kPeerChannel ? comm->settings.peerSlotBytes : comm->settings.slotBytes;
  req.nslots = comm->settings.nslots;
  req.deadline = deadlineFromNow(comm);
  req.abortFlag = &comm->abortFlag;
  if (comm->bootstrap)
    req.whileWaiting = [watch = std::make_shared<SetUpWatch>(comm, peer)] { return watch->check(); };
  return req;
}

uint32_t tagFor(int channel) { return bootstrap::kTagConnectBase + static_cast<uint32_t>(channel); }

// Connections are byte streams (TCP, IB) for the network bridge: ranks that
// share memory have their FIFOs there and no connection.
Result transportFor(ncclComm* comm, int peer, transports::Transport** out, uint32_t* index) {
  transports::Transport* t = selectTransport(comm, peer, true);
  if (!t) return fail(ncclInternalError, "no transport can connect rank %d to rank %d", comm->rank, peer);
  for (uint32_t i = 0; i < comm->transports.size(); ++i)
    if (comm->transports[i].get() == t) *index = i;
  *out = t;
  return Result::success();
}

// The receiver picks the transport (the sender follows the index it sends), so
// when its first choice cannot make an end (an IB device out of resources,
// say) it may fall back to a later transport that can join the pair, with a
// warning rather than a failed job.
Result listenWithFallback(ncclComm* comm, const ConnectionNeed& n, transports::Transport** t, uint32_t* index,
                          std::unique_ptr<transports::RecvEndpoint>* out) {
  Result first = (*t)->listen(makeRequest(comm, n.peer, n.channel), out);
  if (first.ok()) return first;
  const PeerInfo& self = comm->peers[comm->rank];
  for (uint32_t i = *index + 1; i < comm->transports.size(); ++i) {
    transports::Transport* next = comm->transports[i].get();
    if (next->sharesMemory() || !next->canConnect(self, comm->peers[n.peer])) continue;
    if (!next->listen(makeRequest(comm, n.peer, n.channel), out).ok()) continue;
    BRAID_WARN("rank %d: %s; using the %s transport from rank %d instead (slower)", comm->rank,
               first.message().c_str(), next->name(), n.peer);
    *t = next;
    *index = i;
    return Result::success();
  }
  return first;
}

// Phase 1: the receiver makes its end and sends the blob (kept locally for self).
Result listenPhase(const ConnectionNeed& n, std::vector<PendingRecv>* pending) {
  ncclComm* comm = n.comm;
  transports::Transport* t = nullptr;
  uint32_t index = 0;
  BRAID_TRY(transportFor(comm, n.peer, &t, &index));
  PendingRecv p{comm, n.peer, n.channel, nullptr};
  BRAID_TRY(listenWithFallback(comm, n, &t, &index, &p.endpoint));
  const Blob& blob = p.endpoint->blob();
  if (blob.size() > sizeof(ConnectMessage::blob))
    return fail(ncclInternalError, "%s transport blob of %zu bytes is too large", t->name(), blob.size());
  BRAID_INFO(kLogInit, "channel %d: rank %d <- rank %d via %s", n.channel, comm->rank, n.peer, t->name());
  if (n.peer != comm->rank) {
    ConnectMessage msg{};
    msg.transport = index;
    msg.length = static_cast<uint32_t>(blob.size());
    memcpy(msg.blob, blob.data(), blob.size());
    BRAID_TRY(comm->bootstrap->send(n.peer, tagFor(n.channel), &msg, sizeof(msg)));
  }
  pending->push_back(std::move(p));
  return Result::success();
}

// Waits for the receiver's connection message, and meanwhile watches what the
// engine watches: abort, a failure notice from another rank, and whether the
// peer's process is still there, so that a rank killed during set-up is noticed
// within a moment rather than at BRAID_TIMEOUT.
Result awaitBlob(ncclComm* comm, const ConnectionNeed& n) {
  return awaitSetUpMessage(comm, n.peer, tagFor(n.channel),
                           "connection message (channel " + std::to_string(n.channel) + ")");
}

// Phase 2: the sender attaches to the receiver's end.
Result connectPhase(const ConnectionNeed& n, const std::vector<PendingRecv>& pending) {
  ncclComm* comm = n.comm;
  ConnectMessage msg{};
  if (n.peer == comm->rank) {
    for (const PendingRecv& p : pending)
      if (p.comm == comm && p.peer == n.peer && p.channel == n.channel) {
        const Blob& b = p.endpoint->blob();
        msg.length = static_cast<uint32_t>(b.size());
        memcpy(msg.blob, b.data(), b.size());
        uint32_t index = 0;
        transports::Transport* t = nullptr;
        BRAID_TRY(transportFor(comm, n.peer, &t, &index));
        msg.transport = index;
      }
  } else {
    BRAID_TRY(awaitBlob(comm, n));
    BRAID_TRY(comm->bootstrap->recv(n.peer, tagFor(n.channel), &msg, sizeof(msg), deadlineFromNow(comm)));
  }
  if (msg.transport >= comm->transports.size() || msg.length > sizeof(msg.blob))
    return fail(ncclRemoteError, "rank %d sent a malformed connection message (transport %u, %u bytes)",
                n.peer, msg.transport, msg.length);
  transports::Transport* t = comm->transports[msg.transport].get();
  std::unique_ptr<transports::SendConnection> conn;
  BRAID_TRY(t->connect(makeRequest(comm, n.peer, n.channel), Blob(msg.blob, msg.blob + msg.length), &conn));
  comm->sendConns[{n.peer, n.channel}] = std::move(conn);
  return Result::success();
}

bool alreadyConnected(const ConnectionNeed& n) {
  return n.send ? n.comm->sendConns.count({n.peer, n.channel}) != 0
                : n.comm->recvConns.count({n.peer, n.channel}) != 0;
}

}  // namespace

Result awaitSetUpMessage(ncclComm* comm, int peer, uint32_t tag, const std::string& what) {
  const Deadline deadline = deadlineFromNow(comm);
  const PeerInfo& self = comm->peers[comm->rank];
  WaitDiagnosis diagnosis;
  SetUpWatch watch(comm, peer);
  for (;;) {
    diagnosis.poll([&] {
      return "rank " + std::to_string(comm->rank) + " of " + std::to_string(comm->nranks) +
             ": setting up connections, waiting for rank " + std::to_string(peer) + "'s " + what;
    });
    bool ready = false;
    BRAID_TRY(comm->bootstrap->waitFor(peer, tag, 100, &ready));
    if (ready || Clock::now() >= deadline) return Result::success();  // recv() has the message or the error
    if (comm->abortFlag.load(std::memory_order_relaxed) != 0) return fail(ncclSystemError, "rank %d: communicator aborted while connecting to rank %d", comm->rank, peer);
    BRAID_TRY(watch.check());
    BRAID_TRY(checkPeerProcess(self, comm->peers[peer], "rank " + std::to_string(comm->rank) + " waited to connect to it"));
  }
}

namespace {

Result connectEach(const std::vector<ConnectionNeed>& todo) {
  std::vector<PendingRecv> pending;
  for (const ConnectionNeed& n : todo)
    if (!n.send) BRAID_TRY(listenPhase(n, &pending).context("connecting rank " + std::to_string(n.comm->rank) + " to rank " + std::to_string(n.peer)));
  for (const ConnectionNeed& n : todo)
    if (n.send) BRAID_TRY(connectPhase(n, pending).context("connecting rank " + std::to_string(n.comm->rank) + " to rank " + std::to_string(n.peer)));
  for (PendingRecv& p : pending) {
    std::unique_ptr<transports::RecvConnection> conn;
    BRAID_TRY(p.endpoint->accept(&conn).context("accepting rank " + std::to_string(p.peer) + " at rank " + std::to_string(p.comm->rank)));
    p.comm->recvConns[{p.peer, p.channel}] = std::move(conn);
  }
  return Result::success();
}

}  // namespace

Result connectAll(const std::vector<ConnectionNeed>& needs) {
  std::vector<ConnectionNeed> todo;
  for (const ConnectionNeed& n : needs)
    if (!alreadyConnected(n)) todo.push_back(n);
  if (todo.empty()) return Result::success();
  std::vector<ncclComm*> comms;
  for (const ConnectionNeed& n : todo) comms.push_back(n.comm);
  return preferFailureNotice(comms, connectEach(todo));
}

bool awaitFailureNotice(const std::vector<ncclComm*>& comms, std::chrono::milliseconds grace, ncclComm** from,
                        std::string* notice) {
  const Clock::time_point until = Clock::now() + grace;
  for (;;) {
    for (ncclComm* comm : comms)
      if (comm->bootstrap && comm->bootstrap->pollFailure(notice)) {
        *from = comm;
        return true;
      }
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Result preferFailureNotice(const std::vector<ncclComm*>& comms, Result broken) {
  ncclComm* from = nullptr;
  std::string notice;
  if (broken.ok() || !awaitFailureNotice(comms, kNoticeGrace, &from, &notice)) return broken;
  return bootstrap::failureNoticeError(from->rank, notice);
}

}  // namespace braid::engine
