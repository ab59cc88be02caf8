// Microbenchmarks of TCP connections between two processes (ranks that share
// memory have no connections: the engine's FIFOs live in that memory):
// one-way throughput (GB/s) and ping-pong latency, 8 slots of 512 KiB.
//
// Every benchmark run forks a peer process and connects two FIFOs:
//   A: this process (rank 0) -> peer (rank 1): data / pings
//   B: peer -> this process: acknowledgements / pongs
// Both sides busy-poll progress(), as the network bridge does.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "transports/tcp/tcp_transport.h"
#include "transports/transport.h"

namespace braid {
namespace {

constexpr size_t kSlotBytes = 512 << 10;
constexpr int kSlots = 8;
constexpr int kSlotsPerAck = 64;  // 32 MiB between acknowledgements

enum class Kind { kTcp };
enum class Mode { kStream, kEcho };

std::unique_ptr<transports::Transport> makeTransport(Kind k) {
  return tcp::makeTcpTransport();
}

PeerInfo makePeer(int rank) {
  PeerInfo p{};
  p.rank = rank;
  p.cudaDev = -1;
  p.hostHash = 1;
  p.shmDomain = 1;
  p.processId = 1000 + rank;
  p.pid = getpid();
  snprintf(p.hostname, sizeof(p.hostname), "bench%d", rank);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  memcpy(p.tcpAddr, &a, sizeof(a));
  return p;
}

transports::ConnectRequest request(int self, int peer) {
  transports::ConnectRequest r;
  r.self = makePeer(self);
  r.peer = makePeer(peer);
  r.slotBytes = kSlotBytes;
  r.nslots = kSlots;
  r.deadline = Clock::now() + std::chrono::seconds(20);
  return r;
}

void writeBlob(int fd, const Blob& b) {
  uint64_t n = b.size();
  if (write(fd, &n, sizeof(n)) != sizeof(n) ||
      write(fd, b.data(), n) != static_cast<ssize_t>(n))
    _exit(2);
}

Blob readBlob(int fd) {
  uint64_t n = 0;
  if (read(fd, &n, sizeof(n)) != sizeof(n)) _exit(3);
  Blob b(n);
  for (size_t got = 0; got < n;) {
    ssize_t r = read(fd, b.data() + got, n - got);
    if (r <= 0) _exit(3);
    got += static_cast<size_t>(r);
  }
  return b;
}

void check(const Result& r, const char* what) {
  if (!r.ok()) {
    fprintf(stderr, "%s: %s\n", what, r.message().c_str());
    _exit(4);
  }
}

// Busy-polls, yielding the core now and then: on a loaded 2-core machine a
// pure spin would hold the core the peer needs to make progress.
void pause(uint32_t* spins) {
  if (++*spins % 256 == 0) sched_yield();
}

void* acquireSpin(transports::SendConnection* s) {
  void* buf;
  uint32_t spins = 0;
  while (!(buf = s->acquire())) {
    check(s->progress(), "send progress");
    pause(&spins);
  }
  return buf;
}

const void* peekSpin(transports::RecvConnection* r, transports::SendConnection* alsoProgress, size_t* bytes) {
  const void* p;
  uint32_t spins = 0;
  for (;;) {
    check(r->progress(), "recv progress");
    if ((p = r->peek(bytes))) return p;
    if (alsoProgress) check(alsoProgress->progress(), "send progress");
    pause(&spins);
  }
}

void flushSpin(transports::SendConnection* s) {
  uint32_t spins = 0;
  while (!s->flushed()) {
    check(s->progress(), "send progress");
    pause(&spins);
  }
}

// The peer: receives on A (copying each slot out, as a consumer would) and
// answers on B, until a 0-byte slot says stop.
[[noreturn]] void peerMain(Kind kind, Mode mode, int blobIn, int blobOut) {
  auto t = makeTransport(kind);
  std::unique_ptr<transports::RecvEndpoint> ep;
  check(t->listen(request(1, 0), &ep), "peer listen");
  writeBlob(blobOut, ep->blob());
  std::unique_ptr<transports::SendConnection> back;
  check(t->connect(request(1, 0), readBlob(blobIn), &back), "peer connect");
  std::unique_ptr<transports::RecvConnection> in;
  check(ep->accept(&in), "peer accept");
  std::vector<char> sink(kSlotBytes);
  for (uint64_t n = 1;; ++n) {
    size_t bytes = 0;
    const void* p = peekSpin(in.get(), back.get(), &bytes);
    if (bytes == 0) break;
    memcpy(sink.data(), p, bytes);
    in->release();
    if (mode == Mode::kEcho || n % kSlotsPerAck == 0) {
      void* out = acquireSpin(back.get());
      if (mode == Mode::kEcho) memcpy(out, sink.data(), bytes);
      back->post(mode == Mode::kEcho ? bytes : 1);
      check(back->progress(), "peer send progress");
    }
  }
  flushSpin(back.get());
  _exit(0);
}

// Rank 0's end of the pair, with the forked peer behind it.
struct Session {
  Session(Kind kind, Mode mode) {
    int toPeer[2], fromPeer[2];
    if (pipe(toPeer) != 0 || pipe(fromPeer) != 0) abort();
    auto t = makeTransport(kind);
    std::unique_ptr<transports::RecvEndpoint> ep;
    check(t->listen(request(0, 1), &ep), "listen");
    pid = fork();
    if (pid == 0) peerMain(kind, mode, toPeer[0], fromPeer[1]);
    close(toPeer[0]);
    close(fromPeer[1]);
    writeBlob(toPeer[1], ep->blob());
    check(t->connect(request(0, 1), readBlob(fromPeer[0]), &out), "connect");
    check(ep->accept(&in), "accept");
    close(toPeer[1]);
    close(fromPeer[0]);
  }
  ~Session() {
    acquireSpin(out.get());
    out->post(0);  // stop
    flushSpin(out.get());
    size_t bytes;
    // Drain until the peer has gone, so its exit is not counted as an error.
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (in->progress().ok() && in->peek(&bytes)) in->release();
    }
  }
  pid_t pid = -1;
  std::unique_ptr<transports::SendConnection> out;
  std::unique_ptr<transports::RecvConnection> in;
};

void BM_OneWayThroughput(benchmark::State& state, Kind kind) {
  Session s(kind, Mode::kStream);
  std::vector<char> source(kSlotBytes, 1);
  for (auto _ : state) {
    for (int i = 0; i < kSlotsPerAck; ++i) {
      void* buf = acquireSpin(s.out.get());
      memcpy(buf, source.data(), kSlotBytes);
      s.out->post(kSlotBytes);
      check(s.out->progress(), "send progress");
    }
    size_t bytes;
    peekSpin(s.in.get(), s.out.get(), &bytes);
    s.in->release();
  }
  state.SetBytesProcessed(state.iterations() * kSlotsPerAck * int64_t{kSlotBytes});
}

void BM_PingPong(benchmark::State& state, Kind kind) {
  Session s(kind, Mode::kEcho);
  const size_t size = static_cast<size_t>(state.range(0));
  std::vector<char> source(size, 1);
  for (auto _ : state) {
    void* buf = acquireSpin(s.out.get());
    memcpy(buf, source.data(), size);
    s.out->post(size);
    check(s.out->progress(), "send progress");
    size_t bytes;
    const void* p = peekSpin(s.in.get(), s.out.get(), &bytes);
    benchmark::DoNotOptimize(p);
    s.in->release();
  }
  // Round trip / 2: the one-way latency NCCL-style tools report (printed in s).
  state.counters["one_way"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2,
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK_CAPTURE(BM_OneWayThroughput, tcp, Kind::kTcp)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_PingPong, tcp, Kind::kTcp)->Arg(8)->Arg(64 << 10)->Arg(kSlotBytes)
    ->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace braid

BENCHMARK_MAIN();
