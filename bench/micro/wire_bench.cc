// Throughput of the wire-type loops (src/reduce/wire_loops.h) on the host, on
// pieces of a FIFO slot's size (128 Ki values, cache-resident like a slot).
// Items are float32 values; hold them against the network's bytes: a wire
// type pays off where these loops move values faster than the wire saves.
//   Encode        a Send: narrow local values into a message
//   ReduceEncode  a RecvReduceSend: widen, add the local value, narrow
//   ReduceRound   the owner's RecvReduceCopySend: as above, plus the
//                 widened narrowing stored
//   Decode        a Recv: widen into the output
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "reduce/wire_loops.h"

namespace {

using braid::reduce::WireType;
using braid::reduce::WirePiece;

constexpr uint64_t kCount = 128 * 1024;

struct Buffers {
  std::vector<float> src, dst;
  std::vector<uint8_t> in, out;
  explicit Buffers(WireType w)
      : src(kCount), dst(kCount), in(braid::reduce::wireBytes(w, kCount)), out(braid::reduce::wireBytes(w, kCount)) {
    for (uint64_t i = 0; i < kCount; ++i) src[i] = float(int(i % 97) - 48) * 1e-3f;
    WirePiece p;
    p.wire = w;
    p.src = src.data();
    p.out = in.data();
    p.count = kCount;
    braid::reduce::runWirePieceOnHost(p);  // a valid message to receive
  }
};

enum class Kind { Encode, ReduceEncode, ReduceRound, Decode };

void run(benchmark::State& state, WireType w, Kind k) {
  Buffers b(w);
  WirePiece p;
  p.wire = w;
  p.count = kCount;
  p.in = k == Kind::Encode ? nullptr : b.in.data();
  p.src = k == Kind::Decode ? nullptr : b.src.data();
  p.out = k == Kind::Decode ? nullptr : b.out.data();
  p.dst = k == Kind::ReduceRound || k == Kind::Decode ? b.dst.data() : nullptr;
  p.round = k == Kind::ReduceRound;
  for (auto _ : state) {
    braid::reduce::runWirePieceOnHost(p);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(kCount));
}

void registerAll() {
  const std::pair<WireType, const char*> wires[] = {{WireType::BFloat16, "bf16"},
                                                    {WireType::Float16, "fp16"},
                                                    {WireType::Fp8E4M3, "fp8e4m3"},
                                                    {WireType::Fp8E5M2, "fp8e5m2"}};
  const std::pair<Kind, const char*> kinds[] = {{Kind::Encode, "Encode"},
                                                {Kind::ReduceEncode, "ReduceEncode"},
                                                {Kind::ReduceRound, "ReduceRound"},
                                                {Kind::Decode, "Decode"}};
  for (const auto& [w, wn] : wires)
    for (const auto& [k, kn] : kinds)
      benchmark::RegisterBenchmark((std::string(kn) + "/" + wn).c_str(),
                                   [w = w, k = k](benchmark::State& s) { run(s, w, k); });
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
