// One thread driving every rank of a communicator on host memory (4 ranks,
// ncclCommInitAll, a group of one allreduce per rank): the PeerAccess
// algorithm (each rank reduces its block straight from every rank's buffer)
// against the ring through FIFOs (the same communicators' calls with
// NCCL_ALGO=ring at creation), float32 sum in place, 8 B to 64 MiB. Compare
// the two in one run, rounds interleaved:
//   build/bench/peer_access_bench --benchmark_repetitions=3
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
// (one line).
#include <benchmark/benchmark.h>
#include <nccl.h>
#include <stdlib.h>

#include <cstdio>
#include <vector>

namespace {

constexpr int kRanks = 4;

struct Comms {
  ncclComm_t comms[kRanks] = {};
  explicit Comms(const char* algo) {
    if (algo) setenv("NCCL_ALGO", algo, 1);
    if (ncclCommInitAll(comms, kRanks, nullptr) != ncclSuccess) {
      std::fprintf(stderr, "ncclCommInitAll: %s\n", ncclGetLastError(nullptr));
      std::exit(1);
    }
    if (algo) unsetenv("NCCL_ALGO");
  }
  ~Comms() {
    for (ncclComm_t c : comms) ncclCommDestroy(c);
  }
};

Comms& peerAccessComms() {
  static Comms c(nullptr);
  return c;
}
Comms& ringComms() {
  static Comms c("ring");
  return c;
}

void allReduce(benchmark::State& state, Comms& comms) {
  const size_t count = std::max<size_t>(1, size_t(state.range(0)) / sizeof(float));
  std::vector<std::vector<float>> buf(kRanks, std::vector<float>(count, 1.0f));
  for (auto _ : state) {
    ncclGroupStart();
    for (int r = 0; r < kRanks; ++r)
      ncclAllReduce(buf[r].data(), buf[r].data(), count, ncclFloat32, ncclSum, comms.comms[r], nullptr);
    if (ncclGroupEnd() != ncclSuccess) {
      state.SkipWithError(ncclGetLastError(nullptr));
      break;
    }
  }
  // algbw as all_reduce_perf reports it: one rank's buffer per call.
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(count * sizeof(float)));
}

void BM_PeerAccess(benchmark::State& state) { allReduce(state, peerAccessComms()); }
void BM_Ring(benchmark::State& state) { allReduce(state, ringComms()); }

BENCHMARK(BM_PeerAccess)->RangeMultiplier(8)->Range(8, 64 << 20)->UseRealTime();
BENCHMARK(BM_Ring)->RangeMultiplier(8)->Range(8, 64 << 20)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
