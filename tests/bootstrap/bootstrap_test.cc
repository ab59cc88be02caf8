// Bootstrap tests: thread ranks and forked ranks over real TCP sockets, the
// NCCL_COMM_ID path, strangers on the root's and a rank's port, missing ranks,
// abort, and the interface-selection policy on invented interface lists.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "bootstrap/bootstrap.h"
#include "bootstrap/interfaces.h"
#include "bootstrap/wire.h"

namespace braid {
namespace {

using std::chrono::milliseconds;

Deadline in(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

Result check(bool ok, const std::string& what) {
  return ok ? Result::success() : Result(ncclInternalError, what);
}

// Bytes of block `owner` as seen in an allGather: distinct per owner and offset.
uint8_t pattern(int owner, size_t i) { return static_cast<uint8_t>(owner * 31 + i * 7 + 1); }

// What every rank of a job does: allGathers, barriers, and tagged messages to
// the next rank received out of order.
Result exerciseJob(bootstrap::Bootstrap& b) {
  const int rank = b.rank(), n = b.nranks();
  std::vector<int64_t> small(n, -1);
  small[rank] = rank * 1000 + 7;
  BRAID_TRY(b.allGather(small.data(), sizeof(int64_t), in(10)));
  for (int r = 0; r < n; ++r)
    BRAID_TRY(check(small[r] == r * 1000 + 7, "small allGather block " + std::to_string(r) +
                                                  " is " + std::to_string(small[r])));

  const size_t big = 100 * 1024;
  std::vector<uint8_t> blocks(big * n, 0);
  for (size_t i = 0; i < big; ++i) blocks[rank * big + i] = pattern(rank, i);
  BRAID_TRY(b.allGather(blocks.data(), big, in(10)));
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < big; i += 997)
      BRAID_TRY(check(blocks[r * big + i] == pattern(r, i),
                      "large allGather block " + std::to_string(r) + " is wrong"));

  for (int i = 0; i < 3; ++i) BRAID_TRY(b.barrier(in(10)));

  const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  auto text = [](int from, uint32_t tag, int seq) {
    return "from " + std::to_string(from) + " tag " + std::to_string(tag) + " #" +
           std::to_string(seq);
  };
  for (uint32_t tag : {100u, 101u, 102u, 103u}) {
    std::string m = text(rank, tag, 0);
    BRAID_TRY(b.send(next, tag, m.data(), m.size()));
  }
  std::string second = text(rank, 103, 1);
  BRAID_TRY(b.send(next, 103, second.data(), second.size()));
  const std::pair<uint32_t, int> order[] = {{102, 0}, {100, 0}, {103, 0}, {101, 0}, {103, 1}};
  for (auto [tag, seq] : order) {
    std::string want = text(prev, tag, seq);
    std::string got(want.size(), '\0');
    BRAID_TRY(b.recv(prev, tag, got.data(), got.size(), in(10)));
    BRAID_TRY(check(got == want, "expected '" + want + "', got '" + got + "'"));
  }
  return b.barrier(in(10));
}

// Runs fn(rank) on one thread per rank; returns each rank's error ("" = ok).
std::vector<std::string> onThreads(int n, const std::function<Result(int)>& fn) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      Result res = fn(r);
      if (!res.ok()) errors[r] = res.message().empty() ? "failed" : res.message();
    });
  for (auto& t : threads) t.join();
  return errors;
}

void expectAllOk(const std::vector<std::string>& errors) {
  for (size_t r = 0; r < errors.size(); ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

Result createAndExercise(const ncclUniqueId& id, int rank, int n) {
  std::unique_ptr<bootstrap::Bootstrap> b;
  BRAID_TRY(bootstrap::Bootstrap::create(id, rank, n, in(10), &b));
  BRAID_TRY(check(b->rank() == rank && b->nranks() == n, "rank/nranks mismatch"));
  return exerciseJob(*b);
}

// Creates all ranks of one job on threads and hands the bootstraps back.
std::vector<std::unique_ptr<bootstrap::Bootstrap>> createJob(int n, ncclUniqueId* idOut = nullptr) {
  ncclUniqueId id;
  Result r = bootstrap::createUniqueId(&id);
  EXPECT_TRUE(r.ok()) << r.message();
  std::vector<std::unique_ptr<bootstrap::Bootstrap>> bs(n);
  expectAllOk(onThreads(n, [&](int rank) { return bootstrap::Bootstrap::create(id, rank, n, in(10), &bs[rank]); }));
  if (idOut) *idOut = id;
  return bs;
}

bootstrap::UniqueIdContents decode(const ncclUniqueId& id, sockaddr_storage* root) {
  bootstrap::UniqueIdContents c{};
  EXPECT_TRUE(decodeUniqueId(id, &c).ok());
  EXPECT_TRUE(unpackAddr(c.root, root));
  return c;
}

UniqueFd connectTo(const sockaddr_storage& addr) {
  UniqueFd s;
  Result r = connectWithRetry(addr, in(5), nullptr, &s);
  EXPECT_TRUE(r.ok()) << r.message();
  return s;
}

void sendRaw(const UniqueFd& s, const void* data, size_t n) {
  IoProgress p;
  ASSERT_EQ(sendExact(s, data, n, in(5), nullptr, &p), IoStatus::kDone);
}

// True when the other end closed (or reset) the connection within `seconds`.
bool closedByPeer(const UniqueFd& s, double seconds) {
  char buf[256];
  Deadline d = in(seconds);
  for (;;) {
    IoProgress p;
    IoStatus st = recvExact(s, buf, sizeof(buf), d, nullptr, &p);
    if (st == IoStatus::kClosed) return true;
    if (st == IoStatus::kTimeout) return false;
    if (st == IoStatus::kError) return true;
  }
}

int freePort(int family) {
  sockaddr_storage a{};
  a.ss_family = static_cast<sa_family_t>(family);
  if (family == AF_INET)
    reinterpret_cast<sockaddr_in&>(a).sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  else
    reinterpret_cast<sockaddr_in6&>(a).sin6_addr = in6addr_loopback;
  UniqueFd s;
  sockaddr_storage bound;
  if (!listenOn(a, false, &s, &bound).ok()) return -1;
  return addrPort(bound);
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = getenv(name);
    if (old) old_ = old, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// ---- whole jobs ----

class BootstrapThreads : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapThreads, AllGatherBarrierAndTaggedMessages) {
  const int n = GetParam();
  ncclUniqueId id;
  Result r = bootstrap::createUniqueId(&id);
  ASSERT_TRUE(r.ok()) << r.message();
  expectAllOk(onThreads(n, [&](int rank) { return createAndExercise(id, rank, n); }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapThreads, ::testing::Values(1, 2, 3, 8));

TEST(Bootstrap, TwoJobsAtOnceInOneProcess) {
  ncclUniqueId a, b;
  ASSERT_TRUE(bootstrap::createUniqueId(&a).ok());
  ASSERT_TRUE(bootstrap::createUniqueId(&b).ok());
  EXPECT_NE(memcmp(&a, &b, sizeof(a)), 0) << "two unique ids are identical";
  expectAllOk(onThreads(6, [&](int t) {
    return t < 3 ? createAndExercise(a, t, 3) : createAndExercise(b, t - 3, 3);
  }));
}

TEST(Bootstrap, ForkedProcesses) {
  const int n = 4;
  ncclUniqueId id;
  ASSERT_TRUE(bootstrap::createUniqueId(&id).ok());
  std::vector<pid_t> pids;
  for (int rank = 0; rank < n; ++rank) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      Result res = createAndExercise(id, rank, n);
      if (!res.ok()) fprintf(stderr, "forked rank %d: %s\n", rank, res.message().c_str());
      _exit(res.ok() ? 0 : 1);
    }
    pids.push_back(pid);
  }
  Deadline d = in(15);
  for (int rank = 0; rank < n; ++rank) {
    int status = 0;
    pid_t got = 0;
    while ((got = waitpid(pids[rank], &status, WNOHANG)) == 0 && Clock::now() < d)
      std::this_thread::sleep_for(milliseconds(10));
    if (got == 0) {
      kill(pids[rank], SIGKILL);
      waitpid(pids[rank], &status, 0);
      ADD_FAILURE() << "forked rank " << rank << " hung";
      continue;
    }
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "forked rank " << rank;
  }
}

TEST(Bootstrap, LargeMessagesBothWaysDoNotDeadlock) {
  auto bs = createJob(2);
  ASSERT_TRUE(bs[0] && bs[1]);
  const size_t bytes = 16 << 20;  // far beyond socket buffers
  expectAllOk(onThreads(2, [&](int rank) {
    std::vector<uint8_t> out(bytes, static_cast<uint8_t>(rank + 1)), in2(bytes, 0);
    BRAID_TRY(bs[rank]->send(1 - rank, 9, out.data(), bytes));
    BRAID_TRY(bs[rank]->recv(1 - rank, 9, in2.data(), bytes, in(15)));
    return check(in2.front() == 2 - rank && in2.back() == 2 - rank, "payload corrupted");
  }));
}

// ---- NCCL_COMM_ID ----

void runCommIdJob(const std::string& commId, int n) {
  ScopedEnv env("NCCL_COMM_ID", commId);
  std::vector<ncclUniqueId> ids(n);
  expectAllOk(onThreads(n, [&](int rank) {
    // Each rank computes its id itself, as separate processes would.
    BRAID_TRY(bootstrap::createUniqueId(&ids[rank]));
    return createAndExercise(ids[rank], rank, n);
  }));
  for (int r = 1; r < n; ++r) EXPECT_EQ(memcmp(&ids[0], &ids[r], sizeof(ncclUniqueId)), 0);
}

TEST(BootstrapCommId, Ipv4RunsTwiceOnTheSamePort) {
  int port = freePort(AF_INET);
  ASSERT_GT(port, 0);
  std::string commId = "127.0.0.1:" + std::to_string(port);
  runCommIdJob(commId, 3);
  runCommIdJob(commId, 3);  // a second communicator reuses the address
}

TEST(BootstrapCommId, Ipv6AndHostname) {
  int port = freePort(AF_INET6);
  if (port > 0) runCommIdJob("[::1]:" + std::to_string(port), 2);
  port = freePort(AF_INET);
  ASSERT_GT(port, 0);
  runCommIdJob("localhost:" + std::to_string(port), 2);
}

TEST(BootstrapCommId, MagicDependsOnCommIdAndJobId) {
  ncclUniqueId a, b, c;
  {
    ScopedEnv env("NCCL_COMM_ID", "127.0.0.1:29500");
    ASSERT_TRUE(bootstrap::createUniqueId(&a).ok());
    ScopedEnv job("BRAID_JOB_ID", "job-7");
    ASSERT_TRUE(bootstrap::createUniqueId(&b).ok());
  }
  {
    ScopedEnv env("NCCL_COMM_ID", "127.0.0.1:29501");
    ASSERT_TRUE(bootstrap::createUniqueId(&c).ok());
  }
  sockaddr_storage ra, rb, rc;
  bootstrap::UniqueIdContents ca = decode(a, &ra), cb = decode(b, &rb), cc = decode(c, &rc);
  EXPECT_NE(ca.magic, cb.magic);
  EXPECT_NE(ca.magic, cc.magic);
  EXPECT_EQ(ca.flags & bootstrap::kIdRootRunning, 0u);
  EXPECT_EQ(addrToString(ra), "127.0.0.1:29500");
}

TEST(BootstrapCommId, BadValueIsAnError) {
  ScopedEnv env("NCCL_COMM_ID", "127.0.0.1");
  ncclUniqueId id;
  Result r = bootstrap::createUniqueId(&id);
  EXPECT_EQ(r.code(), ncclInvalidArgument);
  EXPECT_NE(r.message().find("NCCL_COMM_ID"), std::string::npos) << r.message();
}

TEST(BootstrapCommId, StrangerWithWrongNranksIsDropped) {
  int port = freePort(AF_INET);
  ASSERT_GT(port, 0);
  std::string commId = "127.0.0.1:" + std::to_string(port);
  ScopedEnv env("NCCL_COMM_ID", commId);
  ncclUniqueId id;
  ASSERT_TRUE(bootstrap::createUniqueId(&id).ok());
  sockaddr_storage root;
  bootstrap::UniqueIdContents c = decode(id, &root);
  const int n = 3;
  std::vector<std::string> errors(n);
  std::vector<std::thread> ranks;
  // Rank 0 starts the root (which then knows nranks); the stranger comes next.
  ranks.emplace_back([&] { Result r = createAndExercise(id, 0, n); errors[0] = r.message(); });
  UniqueFd stranger = connectTo(root);
  bootstrap::Hello h{};
  h.magic = c.magic;
  h.kind = bootstrap::kHelloCheckIn;
  h.rank = 1;
  h.nranks = 5;
  sockaddr_storage fake = root;
  packAddr(fake, &h.addr);
  sendRaw(stranger, &h, sizeof(h));
  EXPECT_TRUE(closedByPeer(stranger, 5)) << "the root kept a hello with the wrong nranks";
  for (int r = 1; r < n; ++r)
    ranks.emplace_back([&, r] { Result res = createAndExercise(id, r, n); errors[r] = res.message(); });
  for (auto& t : ranks) t.join();
  expectAllOk(errors);
}

// ---- strangers and failures ----

TEST(BootstrapRobustness, StrangersAtTheRootDoNotDisturbTheJob) {
  ncclUniqueId id;
  ASSERT_TRUE(bootstrap::createUniqueId(&id).ok());
  sockaddr_storage root;
  bootstrap::UniqueIdContents c = decode(id, &root);
  const int n = 3;
  std::vector<std::string> errors(n);
  std::vector<std::thread> ranks;
  ranks.emplace_back([&] { errors[0] = createAndExercise(id, 0, n).message(); });

  UniqueFd garbage = connectTo(root);
  std::vector<uint8_t> junk(100, 0xab);
  sendRaw(garbage, junk.data(), junk.size());
  UniqueFd silent = connectTo(root);
  UniqueFd partial = connectTo(root);
  sendRaw(partial, junk.data(), 10);
  UniqueFd wrongMagic = connectTo(root);
  bootstrap::Hello h{};
  h.magic = c.magic ^ 1;
  h.kind = bootstrap::kHelloCheckIn;
  h.rank = 1;
  h.nranks = n;
  packAddr(root, &h.addr);
  sendRaw(wrongMagic, &h, sizeof(h));
  UniqueFd outOfRange = connectTo(root);
  h.magic = c.magic;
  h.rank = 7;
  sendRaw(outOfRange, &h, sizeof(h));

  for (int r = 1; r < n; ++r)
    ranks.emplace_back([&, r] { errors[r] = createAndExercise(id, r, n).message(); });
  for (auto& t : ranks) t.join();
  expectAllOk(errors);
  // Every stranger was dropped, at the latest when the last rank checked in.
  EXPECT_TRUE(closedByPeer(garbage, 5));
  EXPECT_TRUE(closedByPeer(wrongMagic, 5));
  EXPECT_TRUE(closedByPeer(outOfRange, 5));
  EXPECT_TRUE(closedByPeer(silent, 5));
  EXPECT_TRUE(closedByPeer(partial, 5));
}

TEST(BootstrapRobustness, StrangersAtARankAreDropped) {
  ncclUniqueId id;
  auto bs = createJob(2, &id);
  ASSERT_TRUE(bs[0] && bs[1]);
  sockaddr_storage root;
  bootstrap::UniqueIdContents c = decode(id, &root);
  const sockaddr_storage& target = bs[1]->listenAddress();
  EXPECT_EQ(addrPort(bs[1]->localAddress()), 0);
  EXPECT_NE(addrPort(target), 0);

  UniqueFd garbage = connectTo(target);
  std::vector<uint8_t> junk(64, 0x5a);
  sendRaw(garbage, junk.data(), junk.size());
  UniqueFd silent = connectTo(target);
  UniqueFd impostor = connectTo(target);
  bootstrap::ConnHeader hdr{c.magic, 9, 0};  // a rank this job does not have
  sendRaw(impostor, &hdr, sizeof(hdr));

  const char msg[] = "still working";
  ASSERT_TRUE(bs[0]->send(1, 5, msg, sizeof(msg)).ok());
  char got[sizeof(msg)] = {};
  Result r = bs[1]->recv(0, 5, got, sizeof(got), in(5));
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_STREQ(got, msg);
  // recv drained the strangers; make sure rank 1 processed them all.
  Deadline d = in(5);
  bool garbageClosed = false, impostorClosed = false;
  while (Clock::now() < d && !(garbageClosed && impostorClosed)) {
    // A recv that times out quickly keeps rank 1 draining its sockets.
    (void)bs[1]->recv(0, 6, got, 1, in(0.05));
    garbageClosed = garbageClosed || closedByPeer(garbage, 0.01);
    impostorClosed = impostorClosed || closedByPeer(impostor, 0.01);
  }
  EXPECT_TRUE(garbageClosed);
  EXPECT_TRUE(impostorClosed);
  (void)silent;
  // The job still works both ways.
  expectAllOk(onThreads(2, [&](int rank) { return exerciseJob(*bs[rank]); }));
}

TEST(BootstrapRobustness, MissingRankIsNamedAtTheDeadline) {
  ncclUniqueId id;
  ASSERT_TRUE(bootstrap::createUniqueId(&id).ok());
  auto start = Clock::now();
  std::vector<std::string> errors = onThreads(2, [&](int rank) {
    std::unique_ptr<bootstrap::Bootstrap> b;
    return bootstrap::Bootstrap::create(id, rank, 3, in(1.0), &b);
  });
  double took = secondsSince(start);
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(errors[r].find("ranks 2 to check in"), std::string::npos) << errors[r];
    EXPECT_NE(errors[r].find("rank " + std::to_string(r) + " of 3"), std::string::npos) << errors[r];
  }
  EXPECT_GE(took, 0.9);
  EXPECT_LT(took, 4.0);
}

TEST(BootstrapRobustness, RootGivesUpAfterItsTimeout) {
  ncclUniqueId id;
  {
    ScopedEnv env("BRAID_BOOTSTRAP_TIMEOUT", "1");
    ASSERT_TRUE(bootstrap::createUniqueId(&id).ok());
  }
  auto start = Clock::now();
  std::unique_ptr<bootstrap::Bootstrap> b;
  Result r = bootstrap::Bootstrap::create(id, 0, 2, in(8), &b);
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_NE(r.message().find("closed its connection"), std::string::npos) << r.message();
  EXPECT_LT(secondsSince(start), 4.0);
}

TEST(BootstrapRobustness, UnreachableRootFailsAtTheDeadline) {
  int port = freePort(AF_INET);
  ASSERT_GT(port, 0);
  ncclUniqueId id;
  {
    ScopedEnv env("NCCL_COMM_ID", "127.0.0.1:" + std::to_string(port));
    ASSERT_TRUE(bootstrap::createUniqueId(&id).ok());
  }
  auto start = Clock::now();
  std::unique_ptr<bootstrap::Bootstrap> b;
  Result r = bootstrap::Bootstrap::create(id, 1, 2, in(0.5), &b);  // rank 0 never starts the root
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_NE(r.message().find("cannot reach the bootstrap root"), std::string::npos) << r.message();
  EXPECT_LT(secondsSince(start), 3.0);
}

TEST(BootstrapRobustness, GarbageUniqueIdIsRejected) {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  std::unique_ptr<bootstrap::Bootstrap> b;
  Result r = bootstrap::Bootstrap::create(id, 0, 1, in(1), &b);
  EXPECT_EQ(r.code(), ncclInvalidArgument);
  ASSERT_TRUE(bootstrap::createUniqueId(&id).ok());
  EXPECT_EQ(bootstrap::Bootstrap::create(id, 2, 2, in(1), &b).code(), ncclInvalidArgument);
}

TEST(BootstrapMessages, RecvTimeoutNamesPeerAndTag) {
  auto bs = createJob(2);
  ASSERT_TRUE(bs[1]);
  char buf[8];
  auto start = Clock::now();
  Result r = bs[1]->recv(0, 42, buf, sizeof(buf), in(0.3));
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_NE(r.message().find("from rank 0"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("tag 0x2a"), std::string::npos) << r.message();
  EXPECT_LT(secondsSince(start), 1.5);
}

TEST(BootstrapMessages, SizeMismatchNamesBothSizes) {
  auto bs = createJob(2);
  ASSERT_TRUE(bs[0] && bs[1]);
  uint64_t v = 1;
  ASSERT_TRUE(bs[0]->send(1, 3, &v, sizeof(v)).ok());
  char buf[16];
  Result r = bs[1]->recv(0, 3, buf, sizeof(buf), in(5));
  EXPECT_EQ(r.code(), ncclInvalidUsage);
  EXPECT_NE(r.message().find("expected 16 bytes from rank 0"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("sent 8 bytes"), std::string::npos) << r.message();
  EXPECT_EQ(bs[0]->send(1, 3, &v, bootstrap::kMaxMessageBytes + 1).code(), ncclInvalidArgument);
  EXPECT_EQ(bs[0]->send(2, 3, &v, sizeof(v)).code(), ncclInvalidArgument);
}

TEST(BootstrapMessages, SelfMessages) {
  auto bs = createJob(1);
  ASSERT_TRUE(bs[0]);
  int v = 17, w = 0;
  ASSERT_TRUE(bs[0]->send(0, 4, &v, sizeof(v)).ok());
  ASSERT_TRUE(bs[0]->recv(0, 4, &w, sizeof(w), in(1)).ok());
  EXPECT_EQ(w, 17);
  EXPECT_EQ(bs[0]->recv(0, 4, &w, sizeof(w), in(1)).code(), ncclInvalidUsage);
}

TEST(BootstrapMessages, PeerDyingMidMessageIsARemoteError) {
  ncclUniqueId id;
  auto bs = createJob(2, &id);
  ASSERT_TRUE(bs[1]);
  sockaddr_storage root;
  bootstrap::UniqueIdContents c = decode(id, &root);
  {
    // Plays rank 0, which then "dies" after 10 of 100 payload bytes.
    UniqueFd fake = connectTo(bs[1]->listenAddress());
    bootstrap::ConnHeader hdr{c.magic, 0, 0};
    bootstrap::FrameHeader frame{bootstrap::frameCheck(c.magic), 9, 100};
    uint8_t part[10] = {};
    sendRaw(fake, &hdr, sizeof(hdr));
    sendRaw(fake, &frame, sizeof(frame));
    sendRaw(fake, part, sizeof(part));
  }
  uint8_t buf[100];
  auto start = Clock::now();
  Result r = bs[1]->recv(0, 9, buf, sizeof(buf), in(10));
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_NE(r.message().find("rank 0's bootstrap connection"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("10 of 100"), std::string::npos) << r.message();
  EXPECT_LT(secondsSince(start), 2.0);
}

TEST(BootstrapMessages, PeerClosingIsNoticedPromptly) {
  auto bs = createJob(2);
  ASSERT_TRUE(bs[0] && bs[1]);
  int v = 5, w = 0;
  ASSERT_TRUE(bs[0]->send(1, 1, &v, sizeof(v)).ok());
  bs[0].reset();
  ASSERT_TRUE(bs[1]->recv(0, 1, &w, sizeof(w), in(5)).ok());  // sent before the close
  EXPECT_EQ(w, 5);
  auto start = Clock::now();
  Result r = bs[1]->recv(0, 2, &w, sizeof(w), in(10));
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_NE(r.message().find("rank 0 closed"), std::string::npos) << r.message();
  EXPECT_LT(secondsSince(start), 2.0);
}

TEST(BootstrapMessages, AbortUnblocksARecvOnAnotherThread) {
  auto bs = createJob(2);
  ASSERT_TRUE(bs[1]);
  auto start = Clock::now();
  auto blocked = std::async(std::launch::async, [&] {
    char buf[4];
    return bs[1]->recv(0, 77, buf, sizeof(buf), in(30));
  });
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_EQ(blocked.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  bs[1]->abort();
  ASSERT_EQ(blocked.wait_for(std::chrono::seconds(2)), std::future_status::ready);
  Result r = blocked.get();
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.message().find("aborted"), std::string::npos) << r.message();
  EXPECT_LT(secondsSince(start), 2.0);
  int v = 0;
  EXPECT_FALSE(bs[1]->send(0, 1, &v, sizeof(v)).ok());
  EXPECT_FALSE(bs[1]->barrier(in(5)).ok());
}

// ---- interface selection ----

bootstrap::NetInterface nic(const std::string& name, const std::string& addr, const std::string& mask,
                 unsigned flags = IFF_UP) {
  bootstrap::NetInterface n;
  n.name = name;
  n.flags = flags;
  if (addr.find(':') != std::string::npos) {
    auto& a = reinterpret_cast<sockaddr_in6&>(n.addr);
    auto& m = reinterpret_cast<sockaddr_in6&>(n.netmask);
    a.sin6_family = m.sin6_family = AF_INET6;
    EXPECT_EQ(inet_pton(AF_INET6, addr.c_str(), &a.sin6_addr), 1);
    EXPECT_EQ(inet_pton(AF_INET6, mask.c_str(), &m.sin6_addr), 1);
  } else {
    auto& a = reinterpret_cast<sockaddr_in&>(n.addr);
    auto& m = reinterpret_cast<sockaddr_in&>(n.netmask);
    a.sin_family = m.sin_family = AF_INET;
    EXPECT_EQ(inet_pton(AF_INET, addr.c_str(), &a.sin_addr), 1);
    EXPECT_EQ(inet_pton(AF_INET, mask.c_str(), &m.sin_addr), 1);
  }
  return n;
}

sockaddr_storage ip(const std::string& text) {
  sockaddr_storage a{};
  Result r = parseHostPort(text, AF_UNSPEC, &a);
  EXPECT_TRUE(r.ok()) << r.message();
  return a;
}

std::vector<bootstrap::NetInterface> machine() {
  return {nic("lo", "127.0.0.1", "255.0.0.0", IFF_UP | IFF_LOOPBACK),
          nic("docker0", "172.17.0.1", "255.255.0.0"),
          nic("eth0", "10.0.0.2", "255.255.255.0"),
          nic("eth1", "10.1.0.2", "255.255.255.0"),
          nic("ib0", "192.168.5.2", "255.255.255.0"),
          nic("eth2", "10.2.0.2", "255.255.255.0", 0 /* down */),
          nic("eth0", "fd00::2", "ffff:ffff:ffff:ffff::"),
          nic("eth0", "fe80::2", "ffff:ffff:ffff:ffff::")};
}

std::string pick(const std::vector<bootstrap::NetInterface>& all, const std::string& ifname,
                 const sockaddr_storage* root = nullptr, int family = AF_UNSPEC) {
  bootstrap::InterfaceQuery q;
  q.ifname = ifname;
  q.root = root;
  q.family = family;
  bootstrap::NetInterface out;
  Result r = selectInterface(all, q, &out);
  if (!r.ok()) return "error: " + r.message();
  return out.name + "/" + hostToString(out.addr);
}

TEST(InterfaceSelection, DefaultSkipsLoopbackAndBridges) {
  EXPECT_EQ(pick(machine(), ""), "eth0/10.0.0.2");
  std::vector<bootstrap::NetInterface> virt = {nic("lo", "127.0.0.1", "255.0.0.0", IFF_UP | IFF_LOOPBACK),
                                    nic("docker0", "172.17.0.1", "255.255.0.0"),
                                    nic("virbr0", "192.168.122.1", "255.255.255.0")};
  EXPECT_EQ(pick(virt, ""), "lo/127.0.0.1");
  virt.erase(virt.begin());
  EXPECT_EQ(pick(virt, ""), "docker0/172.17.0.1");  // nothing better exists
}

TEST(InterfaceSelection, LoopbackRootMeansLoopback) {
  sockaddr_storage root = ip("127.0.0.1:1234");
  EXPECT_EQ(pick(machine(), "", &root), "lo/127.0.0.1");
}

TEST(InterfaceSelection, PrefersTheSubnetOfTheRoot) {
  sockaddr_storage root = ip("192.168.5.77:1234");
  EXPECT_EQ(pick(machine(), "", &root), "ib0/192.168.5.2");
  root = ip("10.1.0.9:1");
  EXPECT_EQ(pick(machine(), "", &root), "eth1/10.1.0.2");
  root = ip("[fd00::9]:1");
  EXPECT_EQ(pick(machine(), "", &root), "eth0/fd00::2");
  // Not on any subnet: the first real interface of the root's family.
  root = ip("[2001:db8::1]:1");
  EXPECT_EQ(pick(machine(), "", &root), "eth0/fd00::2");
  root = ip("8.8.8.8:1");
  EXPECT_EQ(pick(machine(), "", &root), "eth0/10.0.0.2");
  // With an include list, the subnet picks among the listed interfaces.
  root = ip("10.1.0.9:1");
  EXPECT_EQ(pick(machine(), "eth", &root), "eth1/10.1.0.2");
}

TEST(InterfaceSelection, PrefixList) {
  EXPECT_EQ(pick(machine(), "ib"), "ib0/192.168.5.2");
  EXPECT_EQ(pick(machine(), "ib,eth"), "eth0/10.0.0.2");  // order of the machine's list
  EXPECT_EQ(pick(machine(), "docker"), "docker0/172.17.0.1");  // named, so allowed
  EXPECT_EQ(pick(machine(), "lo"), "lo/127.0.0.1");
  EXPECT_EQ(pick(machine(), "eth2").rfind("error:", 0), 0u) << "down interfaces are not usable";
}

TEST(InterfaceSelection, ExcludeList) {
  EXPECT_EQ(pick(machine(), "^eth"), "ib0/192.168.5.2");
  EXPECT_EQ(pick(machine(), "^eth,ib"), "lo/127.0.0.1");
  EXPECT_EQ(pick(machine(), "^=eth0"), "eth1/10.1.0.2");
}

TEST(InterfaceSelection, ExactMatch) {
  std::vector<bootstrap::NetInterface> all = {nic("eth01", "10.9.0.1", "255.255.255.0"),
                                   nic("eth0", "10.0.0.2", "255.255.255.0")};
  EXPECT_EQ(pick(all, "eth0"), "eth01/10.9.0.1");  // prefix
  EXPECT_EQ(pick(all, "=eth0"), "eth0/10.0.0.2");
  EXPECT_EQ(pick(all, "=eth").rfind("error:", 0), 0u);
}

TEST(InterfaceSelection, NoMatchListsTheInterfaces) {
  std::string e = pick(machine(), "enp");
  EXPECT_EQ(e.rfind("error:", 0), 0u) << e;
  EXPECT_NE(e.find("NCCL_SOCKET_IFNAME=enp"), std::string::npos) << e;
  for (const char* name : {"lo (127.0.0.1)", "eth0 (10.0.0.2)", "ib0 (192.168.5.2)", "docker0",
                           "eth2 (10.2.0.2, down)"})
    EXPECT_NE(e.find(name), std::string::npos) << name << " missing from: " << e;
}

TEST(InterfaceSelection, Family) {
  EXPECT_EQ(pick(machine(), "", nullptr, AF_INET6), "eth0/fd00::2");  // link-local skipped
  EXPECT_EQ(pick(machine(), "ib", nullptr, AF_INET6).rfind("error:", 0), 0u);
  EXPECT_EQ(pick(machine(), "", nullptr, AF_INET), "eth0/10.0.0.2");
}

TEST(InterfaceSelection, NameMatching) {
  EXPECT_TRUE(bootstrap::interfaceNameMatches("eth,ib", "ib0"));
  EXPECT_FALSE(bootstrap::interfaceNameMatches("eth,ib", "lo"));
  EXPECT_FALSE(bootstrap::interfaceNameMatches("^eth,ib", "ib0"));
  EXPECT_TRUE(bootstrap::interfaceNameMatches("^eth,ib", "lo"));
  EXPECT_TRUE(bootstrap::interfaceNameMatches("=ib0", "ib0"));
  EXPECT_FALSE(bootstrap::interfaceNameMatches("=ib0", "ib01"));
  EXPECT_FALSE(bootstrap::interfaceNameMatches("^=ib0", "ib0"));
  EXPECT_TRUE(bootstrap::interfaceNameMatches("^=ib0", "ib01"));
}

TEST(InterfaceSelection, ThisMachineHasAChoice) {
  sockaddr_storage a;
  Result r = bootstrap::chooseLocalAddress(nullptr, &a);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(a.ss_family == AF_INET || a.ss_family == AF_INET6);
  ScopedEnv env("NCCL_SOCKET_IFNAME", "no-such-interface-anywhere");
  r = bootstrap::chooseLocalAddress(nullptr, &a);
  EXPECT_EQ(r.code(), ncclInvalidArgument);
  EXPECT_NE(r.message().find("interfaces on this host"), std::string::npos) << r.message();
}

TEST(SocketUtil, AddressParsingAndPrinting) {
  EXPECT_EQ(addrToString(ip("10.1.2.3:5000")), "10.1.2.3:5000");
  EXPECT_EQ(addrToString(ip("[::1]:29500")), "[::1]:29500");
  sockaddr_storage a;
  EXPECT_FALSE(parseHostPort("10.1.2.3", AF_UNSPEC, &a).ok());
  EXPECT_FALSE(parseHostPort("10.1.2.3:0", AF_UNSPEC, &a).ok());
  EXPECT_FALSE(parseHostPort("10.1.2.3:70000", AF_UNSPEC, &a).ok());
  EXPECT_FALSE(parseHostPort("[::1:5", AF_UNSPEC, &a).ok());
  EXPECT_TRUE(isLoopback(ip("127.0.0.5:1")));
  EXPECT_TRUE(isLoopback(ip("[::1]:1")));
  EXPECT_FALSE(isLoopback(ip("10.0.0.1:1")));
}

TEST(SocketUtil, ConnectRetriesUntilTheListenerAppears) {
  int port = freePort(AF_INET);
  ASSERT_GT(port, 0);
  sockaddr_storage addr = ip("127.0.0.1:" + std::to_string(port));
  auto late = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(300));
    UniqueFd l;
    sockaddr_storage bound;
    EXPECT_TRUE(listenOn(addr, true, &l, &bound).ok());
    std::this_thread::sleep_for(milliseconds(500));
    return 0;
  });
  UniqueFd s;
  Result r = connectWithRetry(addr, in(5), nullptr, &s);
  EXPECT_TRUE(r.ok()) << r.message();
  late.get();
  // Nobody listens any more: the deadline ends the retries with the cause.
  auto start = Clock::now();
  r = connectWithRetry(addr, in(0.3), nullptr, &s);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.message().find("refused"), std::string::npos) << r.message();
  EXPECT_LT(secondsSince(start), 1.5);
}

}  // namespace
}  // namespace braid
