#include "bootstrap/root.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

#include "base/env.h"
#include "base/log.h"
#include "bootstrap/wire.h"

namespace braid::bootstrap {

namespace {

// Unidentified connections beyond this are dropped oldest first, so a flood of
// idle connections cannot exhaust the root's descriptors.
constexpr size_t kMaxPendingStrangers = 1024;

struct RootConn {
  UniqueFd sock;
  sockaddr_storage from{};
  Hello buf{};
  size_t got = 0;
  int rank = -1;  // >= 0 once checked in
};

class RootServer {
 public:
  RootServer(UniqueFd listener, const sockaddr_storage& addr, uint64_t magic, int nranks,
             int64_t timeoutS)
      : listener_(std::move(listener)), addr_(addr), magic_(magic), nranks_(nranks),
        timeoutS_(timeoutS) {
    if (nranks_ > 0) {
      byRank_.assign(nranks_, nullptr);
      seen_.assign(nranks_, false);
    }
  }

  void run(const AbortFlag& stop);

 private:
  bool complete() const { return nranks_ > 0 && checkedIn_ == nranks_; }
  void acceptAll();
  // Reads what is there; false when the connection must be dropped.
  bool service(RootConn& c);
  bool onHello(RootConn& c);
  bool onQuery(RootConn& c);
  void drop(size_t index, const std::string& why, bool warn);
  std::vector<int> missing() const;
  void sendTables(Deadline deadline);

  UniqueFd listener_;
  sockaddr_storage addr_;
  uint64_t magic_;
  int nranks_;
  int64_t timeoutS_;
  int checkedIn_ = 0;
  std::vector<std::unique_ptr<RootConn>> conns_;
  std::vector<RootConn*> byRank_;
  std::vector<bool> seen_;  // checked in at some point (maybe gone since)
  std::vector<WireAddr> table_;
};

void RootServer::run(const AbortFlag& stop) {
  const int64_t timeoutS = timeoutS_;
  Deadline deadline = Clock::now() + std::chrono::seconds(timeoutS);
  BRAID_INFO(kLogBootstrap, "bootstrap root: listening at %s for %d ranks", addrToString(addr_).c_str(),
             nranks_);
  std::vector<pollfd> fds;
  while (!complete()) {
    if (stop.load()) {
      BRAID_INFO(kLogBootstrap, "bootstrap root at %s: stopped with %d of %d ranks checked in",
                 addrToString(addr_).c_str(), checkedIn_, nranks_);
      return;
    }
    if (Clock::now() >= deadline) {
      if (nranks_ <= 0)
        BRAID_WARN("bootstrap root at %s: no rank checked in within %lld s "
                   "(BRAID_BOOTSTRAP_TIMEOUT); giving up",
                   addrToString(addr_).c_str(), (long long)timeoutS);
      else
        BRAID_WARN("bootstrap root at %s: rank(s) %s of the %d-rank job never checked in within %lld s "
                   "(BRAID_BOOTSTRAP_TIMEOUT); giving up. Check that those ranks started and got "
                   "the same unique id",
                   addrToString(addr_).c_str(), formatRankList(missing()).c_str(), nranks_,
                   (long long)timeoutS);
      return;
    }
    fds.assign(1, pollfd{listener_.get(), POLLIN, 0});
    for (const auto& c : conns_) fds.push_back(pollfd{c->sock.get(), POLLIN, 0});
    int n = ::poll(fds.data(), fds.size(), msUntil(deadline));
    if (n < 0 && errno != EINTR) {
      BRAID_WARN("bootstrap root at %s: poll failed: %s; giving up", addrToString(addr_).c_str(),
                 strerror(errno));
      return;
    }
    if (n <= 0) continue;
    // Service existing connections first (indices match fds until acceptAll adds more).
    for (size_t i = conns_.size(); i-- > 0;) {
      if (!(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (!service(*conns_[i])) drop(i, "", false);
    }
    if (fds[0].revents & POLLIN) acceptAll();
  }
  // Late connections could not be told anything useful; stop taking them now.
  listener_.reset();
  sendTables(deadline);
  for (size_t i = conns_.size(); i-- > 0;) {
    if (conns_[i]->rank < 0)
      drop(i, "it sent no complete hello before every rank had checked in", true);
  }
  BRAID_INFO(kLogBootstrap, "bootstrap root at %s: all %d ranks checked in", addrToString(addr_).c_str(),
             nranks_);
}

void RootServer::acceptAll() {
  for (;;) {
    auto c = std::make_unique<RootConn>();
    Result r = acceptOne(listener_, &c->sock, &c->from);
    if (!r.ok()) {
      BRAID_WARN("bootstrap root at %s: %s", addrToString(addr_).c_str(), r.message().c_str());
      return;
    }
    if (!c->sock.valid()) return;
    conns_.push_back(std::move(c));
    size_t strangers = 0;
    for (const auto& x : conns_) strangers += x->rank < 0;
    if (strangers > kMaxPendingStrangers) {
      for (size_t i = 0; i < conns_.size(); ++i) {
        if (conns_[i]->rank < 0) {
          drop(i, "too many connections are waiting to identify themselves", true);
          break;
        }
      }
    }
  }
}

bool RootServer::service(RootConn& c) {
  for (;;) {
    ssize_t n = readSome(c.sock, reinterpret_cast<char*>(&c.buf) + c.got, sizeof(Hello) - c.got);
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) {
      std::string from = addrToString(c.from);
      if (c.rank >= 0)
        BRAID_WARN("bootstrap root at %s: rank %d (%s) disconnected before all ranks checked in; "
                   "waiting for it to check in again",
                   addrToString(addr_).c_str(), c.rank, from.c_str());
      else
        BRAID_WARN("bootstrap root at %s: dropped a connection from %s that %s after %zu bytes "
                   "without a valid hello (not a rank of this job?)",
                   addrToString(addr_).c_str(), from.c_str(),
                   n == 0 ? "closed" : strerror(errno), c.got);
      return false;
    }
    c.got += static_cast<size_t>(n);
    if (c.got < sizeof(Hello)) continue;
    c.got = 0;
    bool keep = c.rank < 0 ? onHello(c) : onQuery(c);
    if (!keep) return false;
  }
}

bool RootServer::onHello(RootConn& c) {
  HelloMessage h;
  Result r = decodeHello(&c.buf, sizeof(c.buf), magic_, nranks_, &h);
  if (r.ok() && h.kind != kHelloCheckIn)
    r = fail(ncclRemoteError, "it sent a message other than a hello");
  if (r.ok() && nranks_ > 0 && byRank_[h.rank] != nullptr)
    r = fail(ncclRemoteError, "rank %d already checked in from %s", h.rank,
             addrToString(byRank_[h.rank]->from).c_str());
  if (!r.ok()) {
    BRAID_WARN("bootstrap root at %s: dropped a connection from %s: %s",
               addrToString(addr_).c_str(), addrToString(c.from).c_str(), r.message().c_str());
    return false;
  }
  if (nranks_ <= 0) {
    nranks_ = h.nranks;
    byRank_.assign(nranks_, nullptr);
    seen_.assign(nranks_, false);
  }
  if (table_.empty()) table_.resize(nranks_);
  c.rank = h.rank;
  byRank_[c.rank] = &c;
  seen_[c.rank] = true;
  packAddr(h.addr, &table_[c.rank]);
  ++checkedIn_;
  BRAID_TRACE(kLogBootstrap, "bootstrap root: rank %d checked in from %s (%d/%d)", c.rank,
              addrToString(h.addr).c_str(), checkedIn_, nranks_);
  return true;
}

bool RootServer::onQuery(RootConn& c) {
  HelloMessage h;
  Result r = decodeHello(&c.buf, sizeof(c.buf), magic_, nranks_, &h);
  if (r.ok() && (h.kind != kHelloQuery || h.rank != c.rank))
    r = fail(ncclRemoteError, "a %s claiming rank %d where a query was expected",
             h.kind == kHelloQuery ? "query" : "second hello", h.rank);
  if (!r.ok()) {
    BRAID_WARN("bootstrap root at %s: rank %d sent an unexpected message (%s); dropping it",
               addrToString(addr_).c_str(), c.rank, r.message().c_str());
    return false;
  }
  // Ranks that never came as r, ranks that came and left since as -(r+1).
  std::vector<int32_t> miss;
  for (int m : missing()) miss.push_back(seen_[m] ? -(m + 1) : m);
  RootReply reply{magic_, kReplyMissing, static_cast<uint32_t>(miss.size())};
  Deadline d = Clock::now() + std::chrono::seconds(2);
  IoProgress p1, p2;
  if (sendExact(c.sock, &reply, sizeof(reply), d, nullptr, &p1) != IoStatus::kDone ||
      sendExact(c.sock, miss.data(), miss.size() * sizeof(int32_t), d, nullptr, &p2) !=
          IoStatus::kDone)
    return false;
  return true;
}

void RootServer::drop(size_t index, const std::string& why, bool warn) {
  RootConn& c = *conns_[index];
  if (warn)
    BRAID_WARN("bootstrap root at %s: dropped a connection from %s: %s",
               addrToString(addr_).c_str(), addrToString(c.from).c_str(), why.c_str());
  if (c.rank >= 0) {
    byRank_[c.rank] = nullptr;
    --checkedIn_;
  }
  conns_.erase(conns_.begin() + static_cast<ptrdiff_t>(index));
}

std::vector<int> RootServer::missing() const {
  std::vector<int> out;
  for (int r = 0; r < static_cast<int>(byRank_.size()); ++r)
    if (!byRank_[r]) out.push_back(r);
  return out;
}

void RootServer::sendTables(Deadline deadline) {
  RootReply header{magic_, kReplyTable, static_cast<uint32_t>(nranks_)};
  for (RootConn* c : byRank_) {
    IoProgress p1, p2;
    IoStatus s = sendExact(c->sock, &header, sizeof(header), deadline, nullptr, &p1);
    if (s == IoStatus::kDone)
      s = sendExact(c->sock, table_.data(), table_.size() * sizeof(WireAddr), deadline, nullptr,
                    &p2);
    if (s != IoStatus::kDone)
      BRAID_WARN("bootstrap root at %s: could not send the address table to rank %d: %s",
                 addrToString(addr_).c_str(), c->rank,
                 describeIo(s, p2.done ? p2 : p1, sizeof(header)).c_str());
  }
  for (RootConn* c : byRank_) c->sock.reset();
}

// Owns every root thread of the process: reaps finished ones, and at exit asks
// the rest to stop and joins them so exit neither hangs nor kills a thread that
// is mid-write.
class RootRegistry {
 public:
  static RootRegistry& instance() {
    static RootRegistry registry;
    return registry;
  }

  Result start(std::unique_ptr<RootServer> server, std::shared_ptr<AbortFlag> stop) {
    std::lock_guard<std::mutex> lock(mu_);
    reapLocked();
    auto done = std::make_shared<std::atomic<bool>>(false);
    Entry e;
    e.stop = stop;
    e.done = done;
    try {
      e.thread = std::make_unique<std::thread>([server = std::move(server), stop, done] {
        server->run(*stop);
        done->store(true);
      });
    } catch (const std::system_error& err) {
      return fail(ncclSystemError, "cannot start the bootstrap root thread: %s", err.what());
    }
    entries_.push_back(std::move(e));
    return Result::success();
  }

  ~RootRegistry() {
    std::lock_guard<std::mutex> lock(mu_);
    for (Entry& e : entries_) e.stop->store(true);
    for (Entry& e : entries_) {
      // A forked child inherits these objects but not the threads: it must not
      // join them (and cannot destroy a joinable std::thread), so it lets go.
      if (getpid() == owner_) e.thread->join();
      else (void)e.thread.release();
    }
  }

 private:
  struct Entry {
    std::unique_ptr<std::thread> thread;
    std::shared_ptr<AbortFlag> stop;
    std::shared_ptr<std::atomic<bool>> done;
  };

  RootRegistry() : owner_(getpid()) {
    // Make sure logging's statics outlive this registry: root threads log while
    // the destructor joins them.
    (void)logEnabled(LogLevel::Warn, kLogAll);
  }

  void reapLocked() {
    for (size_t i = entries_.size(); i-- > 0;) {
      if (entries_[i].done->load() && getpid() == owner_) {
        entries_[i].thread->join();
        entries_.erase(entries_.begin() + static_cast<ptrdiff_t>(i));
      }
    }
  }

  std::mutex mu_;
  std::vector<Entry> entries_;
  pid_t owner_;
};

}  // namespace

int64_t bootstrapTimeoutSeconds() {
  int64_t s = envInt("BRAID_BOOTSTRAP_TIMEOUT", 600);
  return s > 0 ? s : 600;
}

Result startRoot(UniqueFd listener, const sockaddr_storage& addr, uint64_t magic, int nranks,
                 RootHandle* handle) {
  auto stop = std::make_shared<AbortFlag>(false);
  auto server = std::make_unique<RootServer>(std::move(listener), addr, magic, nranks,
                                             bootstrapTimeoutSeconds());
  BRAID_TRY(RootRegistry::instance().start(std::move(server), stop));
  if (handle) *handle = RootHandle(stop);
  return Result::success();
}

std::string formatRankList(const std::vector<int>& ranks, size_t limit) {
  std::string s;
  size_t shown = 0;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (shown == limit) {
      s += ", ... (" + std::to_string(ranks.size()) + " in all)";
      break;
    }
    if (!s.empty()) s += ", ";
    s += std::to_string(ranks[i]);
    if (j > i) s += "-" + std::to_string(ranks[j]);
    ++shown;
    i = j + 1;
  }
  return s.empty() ? "none" : s;
}

}  // namespace braid::bootstrap
