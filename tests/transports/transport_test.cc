// Tests of the transports over real memory, real processes (fork) and real
// sockets: TCP connections; which pairs inproc and shm join, and the FIFO
// memory they provide (transports/fifo_memory.h).
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "base/unique_fd.h"
#include "common/loopback_peers.h"
#include "kernels/executor/fifo_view.h"
#include "transports/inproc/inproc_transport.h"
#include "transports/shm/shm_transport.h"
#include "transports/tcp/socket_count.h"
#include "transports/tcp/tcp_transport.h"
#include "transports/tcp/tcp_wire.h"
#include "transports/transport.h"

namespace braid {
namespace {

using namespace std::chrono_literals;
using braidtest::makePeer;
using braidtest::makeRequest;

// The transports with connections (IB has its own suite, over a fake verbs library).
enum class Kind { kTcp };

const char* kindName(Kind k) {
  switch (k) {
    case Kind::kTcp: return "tcp";
  }
  return "?";
}

std::unique_ptr<transports::Transport> makeTransport(Kind k) {
  switch (k) {
    case Kind::kTcp: return tcp::makeTcpTransport();
  }
  return nullptr;
}

// Content of byte i of slot seq; the i >> 9 term makes a shift by 256 visible.
inline uint8_t patternByte(uint64_t seq, size_t i) {
  return static_cast<uint8_t>(seq * 131 + i + (i >> 9) * 17);
}

void fillSlot(void* buf, uint64_t seq, size_t bytes) {
  auto* p = static_cast<uint8_t*>(buf);
  for (size_t i = 0; i < bytes; ++i) p[i] = patternByte(seq, i);
}

// Index of the first wrong byte, or -1.
long checkSlot(const void* buf, uint64_t seq, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(buf);
  for (size_t i = 0; i < bytes; ++i)
    if (p[i] != patternByte(seq, i)) return static_cast<long>(i);
  return -1;
}

// Sizes that cover the edges: empty, one byte, full, around cache lines.
size_t variedSize(uint64_t seq, size_t slotBytes) {
  const size_t pattern[] = {0, 1, slotBytes, 63, 64, 65, slotBytes - 1, 7, 4096 % (slotBytes + 1)};
  return std::min(pattern[seq % (sizeof(pattern) / sizeof(pattern[0]))], slotBytes);
}

// Pumps `count` slots through a pair from one thread, checking order and content.
// Returns an empty string on success, else what went wrong.
std::string exchange(transports::SendConnection* send, transports::RecvConnection* recv, uint64_t count, size_t slotBytes,
                     const std::function<size_t(uint64_t)>& sizeOf) {
  uint64_t sent = 0, received = 0;
  auto deadline = Clock::now() + 15s;
  while (received < count) {
    if (Clock::now() > deadline) return "timed out after " + std::to_string(received) + " slots";
    if (sent < count) {
      if (void* buf = send->acquire()) {
        size_t bytes = sizeOf(sent);
        fillSlot(buf, sent, bytes);
        send->post(bytes);
        ++sent;
      }
    }
    Result r = send->progress();
    if (!r.ok()) return "send progress: " + r.message();
    r = recv->progress();
    if (!r.ok()) return "recv progress: " + r.message();
    size_t bytes = 0;
    while (const void* p = recv->peek(&bytes)) {
      if (bytes != sizeOf(received))
        return "slot " + std::to_string(received) + " has " + std::to_string(bytes) +
               " bytes, expected " + std::to_string(sizeOf(received));
      long bad = checkSlot(p, received, bytes);
      if (bad >= 0)
        return "slot " + std::to_string(received) + " differs at byte " + std::to_string(bad);
      recv->release();
      ++received;
    }
  }
  (void)slotBytes;
  return "";
}

struct Pair {
  std::unique_ptr<transports::SendConnection> send;
  std::unique_ptr<transports::RecvConnection> recv;
};

// Connects rank 1 -> rank 0 within this thread; the ranks claim to be distinct
// processes.
Pair connectPair(transports::Transport& t, size_t slotBytes, int nslots, bool ipv6 = false) {
  Pair pair;
  PeerInfo r0 = makePeer(0, 100, ipv6), r1 = makePeer(1, 101, ipv6);
  EXPECT_TRUE(t.canConnect(r0, r1) && t.canConnect(r1, r0));
  std::unique_ptr<transports::RecvEndpoint> ep;
  Result res = t.listen(makeRequest(r0, r1, slotBytes, nslots), &ep);
  EXPECT_TRUE(res.ok()) << res.message();
  if (!res.ok()) return pair;
  res = t.connect(makeRequest(r1, r0, slotBytes, nslots), ep->blob(), &pair.send);
  EXPECT_TRUE(res.ok()) << res.message();
  if (!res.ok()) return pair;
  res = ep->accept(&pair.recv);
  EXPECT_TRUE(res.ok()) << res.message();
  return pair;
}

// ---- the same behaviour from every transport -------------------------------------

class AnyTransport : public ::testing::TestWithParam<Kind> {};

TEST_P(AnyTransport, VariedSizesArriveInOrderWithContent) {
  auto t = makeTransport(GetParam());
  const size_t slotBytes = 8192;
  Pair p = connectPair(*t, slotBytes, 4);
  ASSERT_TRUE(p.send && p.recv);
  EXPECT_EQ(exchange(p.send.get(), p.recv.get(), 500, slotBytes,
                     [&](uint64_t s) { return variedSize(s, slotBytes); }),
            "");
}

TEST_P(AnyTransport, AcquireTwiceGivesSameBufferAndFullFifoGivesNull) {
  auto t = makeTransport(GetParam());
  const int nslots = 4;
  Pair p = connectPair(*t, 256, nslots);
  ASSERT_TRUE(p.send && p.recv);
  for (int i = 0; i < nslots; ++i) {
    void* a = p.send->acquire();
    ASSERT_NE(a, nullptr) << "slot " << i;
    EXPECT_EQ(p.send->acquire(), a);
    fillSlot(a, i, 100);
    p.send->post(100);
  }
  // Without progress and release, the FIFO holds exactly nslots.
  EXPECT_EQ(p.send->acquire(), nullptr);
  // Drain one slot on the receiving side; a slot frees up for the sender.
  size_t bytes = 0;
  const void* got = nullptr;
  for (auto end = Clock::now() + 5s; !got && Clock::now() < end;) {
    ASSERT_TRUE(p.send->progress().ok());
    ASSERT_TRUE(p.recv->progress().ok());
    got = p.recv->peek(&bytes);
  }
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(bytes, 100u);
  EXPECT_EQ(checkSlot(got, 0, bytes), -1);
  EXPECT_EQ(p.recv->peek(&bytes), got) << "peek without release returns the same slot";
  p.recv->release();
  void* next = nullptr;
  for (auto end = Clock::now() + 5s; !next && Clock::now() < end;) {
    ASSERT_TRUE(p.send->progress().ok());
    next = p.send->acquire();
  }
  EXPECT_NE(next, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(next) % 64, 0u) << "slots are cache-line aligned";
}

TEST_P(AnyTransport, EmptyReceiverPeeksNull) {
  auto t = makeTransport(GetParam());
  Pair p = connectPair(*t, 64, 2);
  ASSERT_TRUE(p.send && p.recv);
  size_t bytes = 123;
  ASSERT_TRUE(p.recv->progress().ok());
  EXPECT_EQ(p.recv->peek(&bytes), nullptr);
  EXPECT_TRUE(p.send->flushed());
}

TEST_P(AnyTransport, AcceptWithoutSenderTimesOutNamingPeer) {
  auto t = makeTransport(GetParam());
  PeerInfo r0 = makePeer(0, 100), r1 = makePeer(1, 101);
  std::unique_ptr<transports::RecvEndpoint> ep;
  ASSERT_TRUE(t->listen(makeRequest(r0, r1, 1024, 2, 200ms), &ep).ok());
  std::unique_ptr<transports::RecvConnection> conn;
  auto start = Clock::now();
  Result r = ep->accept(&conn);
  EXPECT_LT(Clock::now() - start, 3s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_NE(r.message().find("timed out"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("rank 1 (host testhost1"), std::string::npos) << r.message();
}

TEST_P(AnyTransport, AbortFlagStopsAccept) {
  auto t = makeTransport(GetParam());
  PeerInfo r0 = makePeer(0, 100), r1 = makePeer(1, 101);
  std::atomic<uint32_t> abortFlag{0};
  braidtest::ConnectRequest req = makeRequest(r0, r1, 1024, 2, 30s);
  req.abortFlag = &abortFlag;
  std::unique_ptr<transports::RecvEndpoint> ep;
  ASSERT_TRUE(t->listen(req, &ep).ok());
  std::thread raiser([&] {
    std::this_thread::sleep_for(50ms);
    abortFlag.store(1, std::memory_order_relaxed);
  });
  std::unique_ptr<transports::RecvConnection> conn;
  auto start = Clock::now();
  Result r = ep->accept(&conn);
  raiser.join();
  EXPECT_LT(Clock::now() - start, 3s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("aborted"), std::string::npos) << r.message();
}

TEST_P(AnyTransport, MismatchedGeometryIsRefused) {
  auto t = makeTransport(GetParam());
  PeerInfo r0 = makePeer(0, 100), r1 = makePeer(1, 101);
  std::unique_ptr<transports::RecvEndpoint> ep;
  ASSERT_TRUE(t->listen(makeRequest(r0, r1, 1024, 4), &ep).ok());
  std::unique_ptr<transports::SendConnection> send;
  Result r = t->connect(makeRequest(r1, r0, 2048, 4), ep->blob(), &send);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("disagree"), std::string::npos) << r.message();
  Blob garbage(17, 0xab);
  r = t->connect(makeRequest(r1, r0, 1024, 4), garbage, &send);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("malformed"), std::string::npos) << r.message();
}

INSTANTIATE_TEST_SUITE_P(Transports, AnyTransport,
                         ::testing::Values(Kind::kTcp),
                         [](const ::testing::TestParamInfo<Kind>& i) { return kindName(i.param); });

// ---- two real processes -----------------------------------------------------------

void writeAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) _exit(90);
    p += w;
    n -= static_cast<size_t>(w);
  }
}

bool readAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void sendBlob(int fd, const Blob& b) {
  uint64_t n = b.size();
  writeAll(fd, &n, sizeof(n));
  writeAll(fd, b.data(), b.size());
}

bool recvBlob(int fd, Blob* b) {
  uint64_t n = 0;
  if (!readAll(fd, &n, sizeof(n)) || n > (1 << 20)) return false;
  b->resize(n);
  return readAll(fd, b->data(), n);
}

struct Pipe {
  Pipe() {
    int fds[2];
    if (pipe(fds) == 0) {
      r.reset(fds[0]);
      w.reset(fds[1]);
    }
  }
  UniqueFd r, w;
};

// Runs `body` in a forked child; its return value is the exit status.
pid_t forkChild(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    int rc = 99;
    rc = body();
    _exit(rc);
  }
  return pid;
}

int waitChild(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

constexpr uint64_t kPid0 = 100, kPid1 = 101;

// Child side of the large transfer: rank 1 sends `total` bytes in full slots
// (the last one partial) to rank 0.
int sendLarge(Kind kind, int blobFd, size_t slotBytes, int nslots, size_t total) {
  auto t = makeTransport(kind);
  Blob blob;
  if (!recvBlob(blobFd, &blob)) return 10;
  std::unique_ptr<transports::SendConnection> send;
  Result r = t->connect(makeRequest(makePeer(1, kPid1), makePeer(0, kPid0), slotBytes, nslots),
                        blob, &send);
  if (!r.ok()) {
    fprintf(stderr, "child connect: %s\n", r.message().c_str());
    return 11;
  }
  uint64_t seq = 0;
  for (size_t off = 0; off < total; ++seq) {
    void* buf = nullptr;
    while (!(buf = send->acquire()))
      if (!send->progress().ok()) return 12;
    size_t bytes = std::min(slotBytes, total - off);
    fillSlot(buf, seq, bytes);
    send->post(bytes);
    off += bytes;
    if (!send->progress().ok()) return 12;
  }
  while (!send->flushed())
    if (!send->progress().ok()) return 13;
  return 0;
}

void receiveLarge(Kind kind, size_t slotBytes, int nslots, size_t total) {
  auto t = makeTransport(kind);
  PeerInfo r0 = makePeer(0, kPid0), r1 = makePeer(1, kPid1);
  std::unique_ptr<transports::RecvEndpoint> ep;
  ASSERT_TRUE(t->listen(makeRequest(r0, r1, slotBytes, nslots), &ep).ok());
  Pipe blobPipe;
  pid_t child = forkChild([&] {
    return sendLarge(kind, blobPipe.r.get(), slotBytes, nslots, total);
  });
  ASSERT_GT(child, 0);
  sendBlob(blobPipe.w.get(), ep->blob());
  std::unique_ptr<transports::RecvConnection> recv;
  Result r = ep->accept(&recv);
  ASSERT_TRUE(r.ok()) << r.message();
  size_t got = 0;
  uint64_t seq = 0;
  auto deadline = Clock::now() + 15s;
  std::string error;
  while (got < total && error.empty() && Clock::now() < deadline) {
    r = recv->progress();
    if (!r.ok()) error = r.message();
    size_t bytes = 0;
    if (const void* p = recv->peek(&bytes)) {
      size_t expect = std::min(slotBytes, total - got);
      if (bytes != expect) error = "slot " + std::to_string(seq) + " size " + std::to_string(bytes);
      else if (checkSlot(p, seq, bytes) >= 0) error = "slot " + std::to_string(seq) + " content";
      recv->release();
      got += bytes;
      ++seq;
    }
  }
  EXPECT_EQ(error, "");
  EXPECT_EQ(got, total);
  EXPECT_EQ(waitChild(child), 0);
}

// /dev/shm entries this process created (names start with braid-<pid>-).
std::vector<std::string> ourShmSegments() {
  std::vector<std::string> out;
  std::string prefix = "braid-" + std::to_string(getpid()) + "-";
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) out.push_back(e->d_name);
    closedir(d);
  }
  return out;
}

TEST(TcpTransport, LargeTransferAcrossProcesses) {
  receiveLarge(Kind::kTcp, 1 << 20, 4, 64u << 20);
}

// ---- shm specifics ----------------------------------------------------------------

TEST(ShmTransport, CanConnectOnlySameHostOtherProcess) {
  PeerInfo a = makePeer(0, kPid0), b = makePeer(1, kPid1);
  unsetenv("NCCL_SHM_DISABLE");
  auto t = shm::makeShmTransport();
  EXPECT_TRUE(t->canConnect(a, b));
  EXPECT_FALSE(t->canConnect(a, a)) << "same process belongs to inproc";
  PeerInfo other = b;
  other.hostHash ^= 1;
  EXPECT_FALSE(t->canConnect(a, other));
  other = b;
  other.shmDomain ^= 1;
  EXPECT_FALSE(t->canConnect(a, other));
  setenv("NCCL_SHM_DISABLE", "1", 1);
  auto disabled = shm::makeShmTransport();
  unsetenv("NCCL_SHM_DISABLE");
  EXPECT_FALSE(disabled->canConnect(a, b));
  EXPECT_TRUE(t->canConnect(a, b)) << "the variable is read once, at construction";
}

// An engine FIFO of `bytes` with a recognisable image.
Result createFifo(transports::FifoMemoryProvider& provider, uint64_t bytes, std::unique_ptr<transports::FifoMemory>* out) {
  return provider.create(bytes, [bytes](char* image) { memset(image, 0x5a, bytes); }, out);
}

TEST(ShmFifoMemory, SegmentNameIsRemovedOnOpenAndOnDestruction) {
  auto shm = shm::makeShmFifoProvider();
  {
    std::unique_ptr<transports::FifoMemory> made;
    ASSERT_TRUE(createFifo(*shm, 4096, &made).ok());
    EXPECT_EQ(ourShmSegments().size(), 1u) << "create makes the segment";
    EXPECT_EQ(made->base()[4095], 0x5a) << "the image is written before create returns";
  }
  EXPECT_TRUE(ourShmSegments().empty()) << "a FIFO never opened removes its segment";

  std::unique_ptr<transports::FifoMemory> made, opened;
  ASSERT_TRUE(createFifo(*shm, 4096, &made).ok());
  const Blob blob = made->blob();
  ASSERT_TRUE(shm->open(blob, 4096, &opened).ok());
  EXPECT_TRUE(ourShmSegments().empty()) << "open unlinks the name";
  EXPECT_TRUE(opened->blob().empty());
  made->base()[7] = 42;
  EXPECT_EQ(opened->base()[7], 42) << "both ends map the same memory";
  made.reset();  // either side may go first; the other keeps its mapping
  opened->base()[8] = 1;

  std::unique_ptr<transports::FifoMemory> again;
  Result r = shm->open(blob, 4096, &again);
  EXPECT_FALSE(r.ok()) << "the name is gone once opened";
  r = shm->open(blob, 8192, &again);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.message().find("the FIFO needs 8192"), std::string::npos) << r.message();
}

long minorFaults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

// The sender's end of a FIFO is the segment opened: its first message in each
// slot must not wait for the kernel to map the slot's page.
TEST(ShmFifoMemory, BothEndsHaveEveryPageMappedBeforeTheFirstMessage) {
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  const uint64_t bytes = 64 * page;
  auto shm = shm::makeShmFifoProvider();
  std::unique_ptr<transports::FifoMemory> made, opened;
  ASSERT_TRUE(createFifo(*shm, bytes, &made).ok());
  ASSERT_TRUE(shm->open(made->blob(), bytes, &opened).ok());
  for (transports::FifoMemory* end : {made.get(), opened.get()}) {
    volatile char* base = end->base();
    const long before = minorFaults();
    for (uint64_t at = 0; at < bytes; at += page) base[at] = char(base[at] + 1);
    EXPECT_EQ(minorFaults() - before, 0) << (end == made.get() ? "created" : "opened")
                                         << " end: pages mapped at their first touch";
  }
  EXPECT_EQ(made->base()[page], char(0x5a + 2)) << "both ends wrote the same page";
}

TEST(ShmFifoMemory, TooSmallDevShmFailsAtCreateWithSizeNeeded) {
  struct statvfs st;
  ASSERT_EQ(statvfs("/dev/shm", &st), 0);
  const uint64_t capacity = static_cast<uint64_t>(st.f_blocks) * st.f_frsize;
  if (capacity == 0) GTEST_SKIP() << "/dev/shm has no size limit here";
  const uint64_t bytes = capacity + (4 << 20);  // more than it can ever hold
  std::unique_ptr<transports::FifoMemory> made;
  Result r = createFifo(*shm::makeShmFifoProvider(), bytes, &made);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("/dev/shm is too small"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find(std::to_string(bytes) + " bytes"), std::string::npos) << r.message();
  EXPECT_TRUE(ourShmSegments().empty());
}

TEST(HeapFifoMemory, SharedWithinTheProcessOnly) {
  auto heap = inproc::makeHeapFifoProvider();
  std::unique_ptr<transports::FifoMemory> made, opened;
  ASSERT_TRUE(createFifo(*heap, 4096, &made).ok());
  ASSERT_TRUE(heap->open(made->blob(), 4096, &opened).ok());
  EXPECT_EQ(opened->base(), made->base()) << "the same memory, by address";
  EXPECT_EQ(opened->base()[100], 0x5a);
  Blob forged = made->blob();
  forged[4] ^= 1;  // the creating process's id, after the magic
  Result r = heap->open(forged, 4096, &opened);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.message().find("cannot be used by process"), std::string::npos) << r.message();
}

TEST(SharedMemoryTransports, HaveNoConnections) {
  std::unique_ptr<transports::Transport> shared[] = {inproc::makeInprocTransport(), shm::makeShmTransport()};
  for (const auto& t : shared) {
    EXPECT_TRUE(t->sharesMemory()) << t->name();
    std::unique_ptr<transports::RecvEndpoint> ep;
    Result r = t->listen(makeRequest(makePeer(0, kPid0), makePeer(1, kPid1), 4096, 2), &ep);
    EXPECT_EQ(r.code(), ncclInternalError) << t->name();
    EXPECT_NE(r.message().find("has no connections"), std::string::npos) << r.message();
  }
  EXPECT_FALSE(tcp::makeTcpTransport()->sharesMemory());
}

// ---- tcp specifics ----------------------------------------------------------------

UniqueFd rawConnect(const sockaddr_storage& addr) {
  UniqueFd s(socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  socklen_t len = addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (connect(s.get(), reinterpret_cast<const sockaddr*>(&addr), len) != 0) s.reset();
  return s;
}

TEST(TcpTransport, StrangersAreDroppedAndTheRealSenderConnects) {
  auto t = tcp::makeTcpTransport();
  PeerInfo r0 = makePeer(0, kPid0), r1 = makePeer(1, kPid1);
  std::unique_ptr<transports::RecvEndpoint> ep;
  ASSERT_TRUE(t->listen(makeRequest(r0, r1, 4096, 4), &ep).ok());
  tcp::BlobContents blob;
  ASSERT_TRUE(tcp::decodeBlob(ep->blob(), "test", &blob).ok());

  UniqueFd garbage = rawConnect(blob.addr);
  ASSERT_TRUE(garbage.valid());
  std::vector<uint8_t> junk(200, 0x5a);
  ASSERT_EQ(write(garbage.get(), junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  UniqueFd wrongNonce = rawConnect(blob.addr);
  ASSERT_TRUE(wrongNonce.valid());
  tcp::Hello h{tcp::kHelloMagic, blob.nonce + 1, 4096, 1, 0, 4, 1, 0, 0};
  ASSERT_EQ(write(wrongNonce.get(), &h, sizeof(h)), static_cast<ssize_t>(sizeof(h)));
  UniqueFd silent = rawConnect(blob.addr);  // connects and says nothing
  ASSERT_TRUE(silent.valid());
  UniqueFd quitter = rawConnect(blob.addr);
  ASSERT_TRUE(quitter.valid());
  quitter.reset();

  std::unique_ptr<transports::SendConnection> send;
  Result r = t->connect(makeRequest(r1, r0, 4096, 4), ep->blob(), &send);
  ASSERT_TRUE(r.ok()) << r.message();
  std::unique_ptr<transports::RecvConnection> recv;
  r = ep->accept(&recv);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(exchange(send.get(), recv.get(), 50, 4096,
                     [](uint64_t s) { return variedSize(s, 4096); }),
            "");
}

TEST(TcpTransport, OversizedFrameIsAnErrorNamingThePeer) {
  auto t = tcp::makeTcpTransport();
  PeerInfo r0 = makePeer(0, kPid0), r1 = makePeer(1, kPid1);
  std::unique_ptr<transports::RecvEndpoint> ep;
  ASSERT_TRUE(t->listen(makeRequest(r0, r1, 4096, 4), &ep).ok());
  tcp::BlobContents blob;
  ASSERT_TRUE(tcp::decodeBlob(ep->blob(), "test", &blob).ok());
  UniqueFd liar = rawConnect(blob.addr);
  ASSERT_TRUE(liar.valid());
  tcp::Hello h{tcp::kHelloMagic, blob.nonce, 4096, 1, 0, 4, 1, 0, 0};
  ASSERT_EQ(write(liar.get(), &h, sizeof(h)), static_cast<ssize_t>(sizeof(h)));
  std::unique_ptr<transports::RecvConnection> recv;
  Result r = ep->accept(&recv);
  ASSERT_TRUE(r.ok()) << r.message();
  tcp::FrameHeader f{4097, 0, 0};
  ASSERT_EQ(write(liar.get(), &f, sizeof(f)), static_cast<ssize_t>(sizeof(f)));
  std::vector<uint8_t> payload(8192, 1);
  ASSERT_EQ(write(liar.get(), payload.data(), payload.size()), 8192);
  r = Result::success();
  for (auto end = Clock::now() + 5s; r.ok() && Clock::now() < end;) r = recv->progress();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_NE(r.message().find("rank 1 (host testhost1"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("4097"), std::string::npos) << r.message();
  size_t bytes = 0;
  EXPECT_EQ(recv->peek(&bytes), nullptr);
  EXPECT_FALSE(recv->progress().ok()) << "errors are sticky";
}

TEST(TcpTransport, WorksOverIpv6) {
  UniqueFd probe(socket(AF_INET6, SOCK_STREAM, 0));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  if (!probe.valid() || bind(probe.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0)
    GTEST_SKIP() << "no IPv6 loopback here";
  auto t = tcp::makeTcpTransport();
  Pair p = connectPair(*t, 2048, 3, /*ipv6=*/true);
  ASSERT_TRUE(p.send && p.recv);
  EXPECT_EQ(exchange(p.send.get(), p.recv.get(), 100, 2048,
                     [](uint64_t s) { return variedSize(s, 2048); }),
            "");
}

// ---- tcp: several sockets per connection -------------------------------------------

// Sets (or, with nullptr, unsets) an environment variable for one scope.
class EnvGuard {
 public:
  EnvGuard(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old, hadOld_ = true;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~EnvGuard() {
    if (hadOld_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  std::string name_, old_;
  bool hadOld_ = false;
};

// No socket-count variable set, whatever the environment of the test run.
struct NoSocketVars {
  EnvGuard a{"BRAID_TCP_SOCKETS", nullptr};
  EnvGuard b{"NCCL_SOCKET_NTHREADS", nullptr};
  EnvGuard c{"NCCL_NSOCKS_PERTHREAD", nullptr};
};

int blobSockets(const transports::RecvEndpoint& ep) {
  tcp::BlobContents c;
  if (!tcp::decodeBlob(ep.blob(), "test", &c).ok()) return -1;
  return c.nsockets;
}

// Slot sizes around the stripe boundaries, most not divisible by the stripe
// count or by 64.
size_t stripedSize(uint64_t seq, size_t slotBytes) {
  const size_t m = tcp::kMinStripeBytes;
  const size_t pattern[] = {0,         1,         m - 1,     m,         2 * m - 1, 2 * m,
                            2 * m + 1, 3 * m + 17, slotBytes, 4 * m,   5 * m + 123, 7,
                            slotBytes - 1, 4 * m + 3, 100 * 1000};
  return std::min(pattern[seq % (sizeof(pattern) / sizeof(pattern[0]))], slotBytes);
}

class TcpSockets : public ::testing::TestWithParam<int> {};

// Slots of every size arrive whole and in order over 1, 2 and 4 sockets, the
// big ones cut into stripes, the small ones on socket 0 alone.
TEST_P(TcpSockets, StripedSlotsArriveInOrderWithContent) {
  NoSocketVars clean;
  EnvGuard env("BRAID_TCP_SOCKETS", std::to_string(GetParam()).c_str());
  auto t = tcp::makeTcpTransport();
  const size_t slotBytes = 5 * tcp::kMinStripeBytes + 4099;
  PeerInfo r0 = makePeer(0, kPid0), r1 = makePeer(1, kPid1);
  std::unique_ptr<transports::RecvEndpoint> ep;
  ASSERT_TRUE(t->listen(makeRequest(r0, r1, slotBytes, 3), &ep).ok());
  EXPECT_EQ(blobSockets(*ep), GetParam());
  std::unique_ptr<transports::SendConnection> send;
  Result r = t->connect(makeRequest(r1, r0, slotBytes, 3), ep->blob(), &send);
  ASSERT_TRUE(r.ok()) << r.message();
  std::unique_ptr<transports::RecvConnection> recv;
  r = ep->accept(&recv);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(exchange(send.get(), recv.get(), 150, slotBytes,
                     [&](uint64_t s) { return stripedSize(s, slotBytes); }),
            "");
  EXPECT_TRUE(send->flushed());
}

INSTANTIATE_TEST_SUITE_P(Tcp, TcpSockets, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::to_string(i.param) + "sockets";
                         });

// Two processes, 4 sockets, 64 MiB: the striped stream under real flow control.
TEST(TcpTransport, LargeStripedTransferAcrossProcesses) {
  NoSocketVars clean;
  EnvGuard env("BRAID_TCP_SOCKETS", "4");
  receiveLarge(Kind::kTcp, 1 << 20, 4, (64u << 20) + 12345);
}

// The receiver decides: a sender configured for 2 sockets follows a blob that
// says 4, and the data arrive intact.
TEST(TcpTransport, MismatchedSocketCountsFollowTheReceiver) {
  NoSocketVars clean;
  auto t = tcp::makeTcpTransport();
  const size_t slotBytes = 4 * tcp::kMinStripeBytes + 1;
  PeerInfo r0 = makePeer(0, kPid0), r1 = makePeer(1, kPid1);
  std::unique_ptr<transports::RecvEndpoint> ep;
  {
    EnvGuard env("BRAID_TCP_SOCKETS", "4");
    ASSERT_TRUE(t->listen(makeRequest(r0, r1, slotBytes, 4), &ep).ok());
  }
  EXPECT_EQ(blobSockets(*ep), 4);
  std::unique_ptr<transports::SendConnection> send;
  {
    EnvGuard env("BRAID_TCP_SOCKETS", "2");
    Result r = t->connect(makeRequest(r1, r0, slotBytes, 4), ep->blob(), &send);
    ASSERT_TRUE(r.ok()) << r.message();
  }
  std::unique_ptr<transports::RecvConnection> recv;
  Result r = ep->accept(&recv);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(exchange(send.get(), recv.get(), 60, slotBytes,
                     [&](uint64_t s) { return stripedSize(s, slotBytes); }),
            "");
}

TEST(TcpTransport, SocketCountComesFromTheVariables) {
  NoSocketVars clean;
  PeerInfo a = makePeer(0, kPid0), b = makePeer(1, kPid1);
  braidtest::ConnectRequest sameHost = makeRequest(a, b, 4096, 2);
  EXPECT_EQ(tcp::tcpSocketsFor(sameHost), tcp::kTcpSocketsSameHost);
  // Another host, on a routable address.
  PeerInfo far = b;
  far.hostHash ^= 1;
  braidtest::ConnectRequest crossHost = makeRequest(a, far, 4096, 2);
  sockaddr_in routable{};
  routable.sin_family = AF_INET;
  routable.sin_addr.s_addr = htonl(0x0a000001);  // 10.0.0.1
  memcpy(crossHost.self.tcpAddr, &routable, sizeof(routable));
  EXPECT_EQ(tcp::tcpSocketsFor(crossHost), tcp::kTcpSocketsCrossHost);
  // Another host id but a loopback address is still this machine.
  EXPECT_EQ(tcp::tcpSocketsFor(makeRequest(a, far, 4096, 2)), tcp::kTcpSocketsSameHost);
  {
    EnvGuard t("NCCL_SOCKET_NTHREADS", "4");
    EXPECT_EQ(tcp::tcpSocketsFor(sameHost), 4);
    EnvGuard s("NCCL_NSOCKS_PERTHREAD", "2");
    EXPECT_EQ(tcp::tcpSocketsFor(sameHost), 8);
    EXPECT_EQ(tcp::tcpSocketsFor(crossHost), 8);
    EnvGuard o("BRAID_TCP_SOCKETS", "3");
    EXPECT_EQ(tcp::tcpSocketsFor(sameHost), 3) << "BRAID_TCP_SOCKETS wins";
  }
  {
    EnvGuard s("NCCL_NSOCKS_PERTHREAD", "16");
    EnvGuard t("NCCL_SOCKET_NTHREADS", "16");
    EXPECT_EQ(tcp::tcpSocketsFor(sameHost), tcp::kMaxSockets);
  }
  {
    EnvGuard o("BRAID_TCP_SOCKETS", "1000");
    EXPECT_EQ(tcp::tcpSocketsFor(sameHost), tcp::kMaxSockets);
  }
  {
    EnvGuard o("BRAID_TCP_SOCKETS", "0");
    EXPECT_EQ(tcp::tcpSocketsFor(sameHost), 1);
  }
}

// Opens socket `index` of a hand-made sender and introduces it.
UniqueFd rawSocket(const tcp::BlobContents& blob, size_t slotBytes, int nsockets, int index) {
  UniqueFd s = rawConnect(blob.addr);
  tcp::Hello h{tcp::kHelloMagic, blob.nonce, slotBytes, 1, 0, 4, nsockets, index, 0};
  if (s.valid() && write(s.get(), &h, sizeof(h)) != static_cast<ssize_t>(sizeof(h))) s.reset();
  return s;
}

// A receiver endpoint for `nsockets` sockets and its decoded blob.
struct RawListener {
  RawListener(transports::Transport& t, size_t slotBytes, int nsockets, std::atomic<uint32_t>* abortFlag = nullptr) {
    EnvGuard env("BRAID_TCP_SOCKETS", std::to_string(nsockets).c_str());
    braidtest::ConnectRequest req = makeRequest(makePeer(0, kPid0), makePeer(1, kPid1), slotBytes, 4);
    req.abortFlag = abortFlag;
    ok = t.listen(req, &ep).ok() && tcp::decodeBlob(ep->blob(), "test", &blob).ok();
  }
  std::unique_ptr<transports::RecvEndpoint> ep;
  tcp::BlobContents blob;
  bool ok = false;
};

Result progressUntilError(transports::RecvConnection* recv) {
  Result r;
  for (auto end = Clock::now() + 5s; r.ok() && Clock::now() < end;) r = recv->progress();
  return r;
}

// The wire format by hand: sockets introduced out of order, a slot cut as
// tcp::stripeOf says, each stripe behind its own header.
TEST(TcpTransport, HandMadeStripesAreReassembled) {
  auto t = tcp::makeTcpTransport();
  const size_t slotBytes = 3 * tcp::kMinStripeBytes + 5;
  RawListener l(*t, slotBytes, 3);
  ASSERT_TRUE(l.ok);
  UniqueFd s2 = rawSocket(l.blob, slotBytes, 3, 2);
  UniqueFd s0 = rawSocket(l.blob, slotBytes, 3, 0);
  UniqueFd s1 = rawSocket(l.blob, slotBytes, 3, 1);
  std::unique_ptr<transports::RecvConnection> recv;
  Result r = l.ep->accept(&recv);
  ASSERT_TRUE(r.ok()) << r.message();
  std::vector<uint8_t> slot(slotBytes);
  fillSlot(slot.data(), 0, slotBytes);
  const int fds[] = {s0.get(), s1.get(), s2.get()};
  ASSERT_EQ(tcp::stripeCount(slotBytes, 3), 3);
  for (int i = 2; i >= 0; --i) {  // the last stripe first
    tcp::Stripe st = tcp::stripeOf(slotBytes, 3, i);
    tcp::FrameHeader f{slotBytes, 0, 0};
    ASSERT_EQ(write(fds[i], &f, sizeof(f)), static_cast<ssize_t>(sizeof(f)));
    writeAll(fds[i], slot.data() + st.offset, st.bytes);
  }
  size_t bytes = 0;
  const void* p = nullptr;
  for (auto end = Clock::now() + 5s; !p && Clock::now() < end;) {
    ASSERT_TRUE(recv->progress().ok());
    p = recv->peek(&bytes);
  }
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(bytes, slotBytes);
  EXPECT_EQ(checkSlot(p, 0, bytes), -1);
}

// A receiver of two-socket connections with slots of two stripes, fed by
// hand: socket 0 has sent its header and stripe of slot 0, socket 1 nothing yet.
struct HandFedStripes {
  static constexpr size_t kSlotBytes = 2 * tcp::kMinStripeBytes;
  std::unique_ptr<transports::Transport> t = tcp::makeTcpTransport();
  RawListener l{*t, kSlotBytes, 2};
  UniqueFd s0, s1;
  std::unique_ptr<transports::RecvConnection> recv;
  std::vector<uint8_t> stripe = std::vector<uint8_t>(tcp::kMinStripeBytes, 7);

  void start() {
    ASSERT_TRUE(l.ok);
    s0 = rawSocket(l.blob, kSlotBytes, 2, 0);
    s1 = rawSocket(l.blob, kSlotBytes, 2, 1);
    ASSERT_TRUE(l.ep->accept(&recv).ok());
    tcp::FrameHeader f{kSlotBytes, 0, 0};
    ASSERT_EQ(write(s0.get(), &f, sizeof(f)), static_cast<ssize_t>(sizeof(f)));
    writeAll(s0.get(), stripe.data(), stripe.size());
  }
};

// Socket 1's header disagrees with socket 0's on the slot's size: an error,
// and the slot is never delivered.
TEST(TcpTransport, StripeHeadersThatDisagreeAreAnError) {
  HandFedStripes h;
  ASSERT_NO_FATAL_FAILURE(h.start());
  tcp::FrameHeader f{HandFedStripes::kSlotBytes - 1, 0, 0};
  ASSERT_EQ(write(h.s1.get(), &f, sizeof(f)), static_cast<ssize_t>(sizeof(f)));
  writeAll(h.s1.get(), h.stripe.data(), h.stripe.size());
  Result r = progressUntilError(h.recv.get());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_NE(r.message().find("on another"), std::string::npos) << r.message();
  size_t bytes = 0;
  EXPECT_EQ(h.recv->peek(&bytes), nullptr);
}

// A sender whose second socket dies owing its stripe: the receiver fails
// naming the peer, though socket 0 delivered its part cleanly.
TEST(TcpTransport, DeathOnASecondSocketMidSlotIsReported) {
  HandFedStripes h;
  ASSERT_NO_FATAL_FAILURE(h.start());
  tcp::FrameHeader f{HandFedStripes::kSlotBytes, 0, 0};
  ASSERT_EQ(write(h.s1.get(), &f, sizeof(f)), static_cast<ssize_t>(sizeof(f)));
  h.s1.reset();
  Result r = progressUntilError(h.recv.get());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_NE(r.message().find("rank 1 (host testhost1"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("middle of a slot"), std::string::npos) << r.message();
}

// A hello with the right nonce but another socket count comes from a
// different build: a clear error, not a guess.
TEST(TcpTransport, HelloWithAnotherSocketCountIsRefused) {
  auto t = tcp::makeTcpTransport();
  RawListener l(*t, 4096, 2);
  ASSERT_TRUE(l.ok);
  UniqueFd s0 = rawSocket(l.blob, 4096, 3, 0);
  ASSERT_TRUE(s0.valid());
  std::unique_ptr<transports::RecvConnection> recv;
  Result r = l.ep->accept(&recv);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("3 TCP sockets"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("listens with 2"), std::string::npos) << r.message();
}

// The abort flag stops an accept that has some of its sockets but not all.
TEST(TcpTransport, AbortFlagStopsAcceptMissingSockets) {
  auto t = tcp::makeTcpTransport();
  std::atomic<uint32_t> abortFlag{0};
  RawListener l(*t, 4096, 4, &abortFlag);
  ASSERT_TRUE(l.ok);
  UniqueFd s0 = rawSocket(l.blob, 4096, 4, 0);
  UniqueFd s2 = rawSocket(l.blob, 4096, 4, 2);
  std::thread raiser([&] {
    std::this_thread::sleep_for(50ms);
    abortFlag.store(1, std::memory_order_relaxed);
  });
  std::unique_ptr<transports::RecvConnection> recv;
  Result r = l.ep->accept(&recv);
  raiser.join();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("aborted"), std::string::npos) << r.message();
}

// Rank 1 (child) sends a few slots and then is killed: rank 0 must get an
// error naming it rather than wait forever. With several sockets the slots are
// large enough to be striped over all of them.
void killedSenderIsReported(size_t slotBytes) {
  auto t = tcp::makeTcpTransport();
  PeerInfo r0 = makePeer(0, kPid0), r1 = makePeer(1, kPid1);
  std::unique_ptr<transports::RecvEndpoint> ep;
  ASSERT_TRUE(t->listen(makeRequest(r0, r1, slotBytes, 4), &ep).ok());
  Pipe blobPipe, ready;
  pid_t child = forkChild([&] {
    Blob blob;
    if (!recvBlob(blobPipe.r.get(), &blob)) return 10;
    std::unique_ptr<transports::SendConnection> send;
    if (!t->connect(makeRequest(r1, r0, slotBytes, 4), blob, &send).ok()) return 11;
    for (int i = 0; i < 3; ++i) {
      void* buf = send->acquire();
      if (!buf) return 12;
      fillSlot(buf, i, slotBytes);
      send->post(slotBytes);
    }
    while (!send->flushed())
      if (!send->progress().ok()) return 13;
    char c = 1;
    writeAll(ready.w.get(), &c, 1);
    for (;;) pause();
  });
  ASSERT_GT(child, 0);
  sendBlob(blobPipe.w.get(), ep->blob());
  std::unique_ptr<transports::RecvConnection> recv;
  ASSERT_TRUE(ep->accept(&recv).ok());
  char c;
  ASSERT_TRUE(readAll(ready.r.get(), &c, 1));
  int got = 0;
  for (auto end = Clock::now() + 5s; got < 3 && Clock::now() < end;) {
    ASSERT_TRUE(recv->progress().ok());
    size_t bytes;
    if (const void* p = recv->peek(&bytes)) {
      EXPECT_EQ(bytes, slotBytes);
      EXPECT_EQ(checkSlot(p, got, bytes), -1);
      recv->release();
      ++got;
    }
  }
  ASSERT_EQ(got, 3);
  kill(child, SIGKILL);
  EXPECT_EQ(waitChild(child), 128 + SIGKILL);
  Result r;
  auto start = Clock::now();
  while (r.ok() && Clock::now() - start < 5s) r = recv->progress();
  ASSERT_FALSE(r.ok()) << "no error 5 s after the peer died";
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_NE(r.message().find("rank 1 (host testhost1"), std::string::npos) << r.message();
}

// Rank 0 (child) receives one slot and is killed: the sender must fail.
void killedReceiverIsReported(size_t slotBytes) {
  auto t = tcp::makeTcpTransport();
  PeerInfo r0 = makePeer(0, kPid0), r1 = makePeer(1, kPid1);
  Pipe blobPipe, ready;
  pid_t child = forkChild([&] {
    std::unique_ptr<transports::RecvEndpoint> ep;
    if (!t->listen(makeRequest(r0, r1, slotBytes, 4), &ep).ok()) return 10;
    sendBlob(blobPipe.w.get(), ep->blob());
    std::unique_ptr<transports::RecvConnection> recv;
    if (!ep->accept(&recv).ok()) return 11;
    size_t bytes;
    while (!recv->peek(&bytes))
      if (!recv->progress().ok()) return 12;
    recv->release();
    char c = 1;
    writeAll(ready.w.get(), &c, 1);
    for (;;) pause();
  });
  ASSERT_GT(child, 0);
  Blob blob;
  ASSERT_TRUE(recvBlob(blobPipe.r.get(), &blob));
  std::unique_ptr<transports::SendConnection> send;
  Result r = t->connect(makeRequest(r1, r0, slotBytes, 4), blob, &send);
  ASSERT_TRUE(r.ok()) << r.message();
  void* buf = send->acquire();
  ASSERT_NE(buf, nullptr);
  send->post(slotBytes);
  ASSERT_TRUE(send->progress().ok());
  char c;
  ASSERT_TRUE(readAll(ready.r.get(), &c, 1));
  kill(child, SIGKILL);
  EXPECT_EQ(waitChild(child), 128 + SIGKILL);
  auto start = Clock::now();
  while (r.ok() && Clock::now() - start < 5s) {
    if (void* b = send->acquire()) send->post(slotBytes), (void)b;
    r = send->progress();
  }
  ASSERT_FALSE(r.ok()) << "no error 5 s after the peer died";
  EXPECT_EQ(r.code(), ncclRemoteError);
  EXPECT_NE(r.message().find("rank 0 (host testhost0"), std::string::npos) << r.message();
}

TEST(TcpTransport, KilledSenderIsReportedByReceiver) { killedSenderIsReported(4096); }

TEST(TcpTransport, KilledReceiverIsReportedBySender) { killedReceiverIsReported(4096); }

TEST(TcpTransport, KilledStripingSenderIsReportedByReceiver) {
  EnvGuard env("BRAID_TCP_SOCKETS", "4");
  killedSenderIsReported(4 * tcp::kMinStripeBytes + 4096);
}

TEST(TcpTransport, KilledStripingReceiverIsReportedBySender) {
  EnvGuard env("BRAID_TCP_SOCKETS", "4");
  killedReceiverIsReported(4 * tcp::kMinStripeBytes + 4096);
}

}  // namespace
}  // namespace braid
