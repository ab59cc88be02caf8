// One-way latency of the engine's FIFO protocols between two threads pinned
// to two CPUs: LL lines against bulk slots, the FIFOs in heap memory as ranks
// of one process use them (shared memory between processes is the same
// layout in a /dev/shm segment). A ping-pong of `bytes`; the time per
// iteration is one round trip, and the counter "one_way_ns" half of it. What
// a small call between ranks on two cores cannot go below, without the
// runner, the plan or the scheduler in the way.
#include <benchmark/benchmark.h>
#include <pthread.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "base/cpu_affinity.h"
#include "kernels/executor/bulk_protocol.h"
#include "kernels/executor/ll_protocol.h"
#include "transports/fifo_memory.h"
#include "transports/inproc/inproc_transport.h"

namespace braid {
namespace {

using executor::Protocol;

constexpr uint32_t kSlots = 8;
constexpr uint32_t kFingerprint = 0x5eed;

// A FIFO in heap memory from the in-process transport's provider, as the
// engine makes it (lanes/port_table.cc), with its two ports.
struct HeapFifo {
  HeapFifo(transports::FifoMemoryProvider& provider, Protocol protocol, uint64_t payloadBytes)
      : layout(executor::fifoLayout(protocol, kSlots, payloadBytes)) {
    ok = provider.create(layout.totalBytes, [&](char* image) { executor::initFifoImage(image, layout, 0); }, &memory)
             .ok();
    if (ok) send.fifo = recv.fifo = executor::fifoViewAt(memory->base(), layout);
  }
  executor::FifoLayout layout;
  std::unique_ptr<transports::FifoMemory> memory;
  bool ok = false;
  executor::Port send, recv;
};

// One end: sends on `out`, receives on `in`, spinning (the default
// WaitControl polls until the message is there).
class End {
 public:
  End(Protocol protocol, executor::Port& out, executor::Port& in, uint64_t bytes)
      : protocol_(protocol), out_(out), in_(in), bytes_(bytes), stage_((bytes + 3) / 4 + 1) {}

  void send() {
    (void)executor::waitCredit(out_, group_, wait_);
    if (protocol_ == Protocol::LL) {
      executor::llSend(out_, bytes_, kFingerprint, stage_.data(), group_);
    } else {
      memcpy(executor::bulkSlot(out_), stage_.data(), bytes_);
      executor::bulkPost(out_, bytes_, kFingerprint, group_);
    }
  }
  void recv() {
    if (protocol_ == Protocol::LL) {
      (void)executor::llRecv(in_, bytes_, kFingerprint, stage_.data(), group_, wait_);
    } else {
      const char* data = nullptr;
      (void)executor::bulkWaitRecv(in_, bytes_, kFingerprint, &data, group_, wait_);
      memcpy(stage_.data(), data, bytes_);
      executor::bulkRelease(in_, group_);
    }
  }

 private:
  Protocol protocol_;
  executor::Port& out_;
  executor::Port& in_;
  uint64_t bytes_;
  std::vector<uint32_t> stage_;
  executor::HostGroup group_;
  executor::WaitControl wait_;
};

// args: protocol (0 LL, 1 bulk), message bytes, LL slot payload (0: the message).
void BM_FifoPingPong(benchmark::State& state) {
  const Protocol protocol = state.range(0) == 0 ? Protocol::LL : Protocol::Bulk;
  const uint64_t bytes = uint64_t(state.range(1));
  const uint64_t payload = state.range(2) > 0 ? uint64_t(state.range(2)) : bytes;
  cpu_set_t saved;
  pthread_getaffinity_np(pthread_self(), sizeof saved, &saved);
  // CPU 1 first: the echo thread goes there, and a machine without it would
  // leave the timed loop waiting for ever.
  if (!pinThisThread(1) || !pinThisThread(0)) {
    pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
    state.SkipWithError("this benchmark needs CPUs 0 and 1");
    return;
  }
  auto provider = inproc::makeHeapFifoProvider();
  HeapFifo there(*provider, protocol, payload), back(*provider, protocol, payload);
  if (!there.ok || !back.ok) {
    pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
    state.SkipWithError("cannot allocate the FIFOs");
    return;
  }
  std::atomic<int64_t> rounds{-1};
  std::thread echo([&] {
    (void)pinThisThread(1);
    End end(protocol, back.send, there.recv, bytes);
    while (rounds.load(std::memory_order_acquire) < 0) {
    }
    for (int64_t i = rounds.load(); i > 0; --i) {
      end.recv();
      end.send();
    }
  });
  // How many round trips the timed loop makes is up to Google Benchmark:
  // the echo side is told once, before the first (the state's max_iterations).
  rounds.store(int64_t(state.max_iterations), std::memory_order_release);
  End end(protocol, there.send, back.recv, bytes);
  for (auto _ : state) {
    end.send();
    end.recv();
  }
  echo.join();
  pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
  state.counters["one_way_ns"] =
      benchmark::Counter(double(state.iterations()) * 2e-9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(protocol == Protocol::LL ? "LL" : "bulk");
}

void protocolsAndSizes(benchmark::internal::Benchmark* b) {
  for (int64_t protocol : {0, 1})
    for (int64_t bytes : {8, 64, 1024, 8192}) b->Args({protocol, bytes, 0});
  // An 8 B message in the host runner's LL slot of 64 KiB (lane_program.h).
  b->Args({0, 8, 64 << 10});
}

BENCHMARK(BM_FifoPingPong)->Apply(protocolsAndSizes)->UseRealTime()->MinTime(0.2);

}  // namespace
}  // namespace braid

BENCHMARK_MAIN();
