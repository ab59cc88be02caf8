// Throughput of braid's host reductions against memcpy.
//
// GB/s counts the bytes of output (count * typeSize) per second, the figure to
// hold against memcpy's bandwidth: a sum reads two buffers and writes one, so
// at DRAM sizes it moves 3x the bytes that GB/s reports (memcpy moves 2x).
//   Reduce        dst = a + b, three distinct buffers
//   ReduceInPlace a += b (dst == a), how schedules accumulate
//   Memcpy        std::memcpy of the same number of bytes
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "reduce/host_reduce.h"

namespace {

constexpr int64_t kMiB = 1 << 20;

// Buffers filled with small finite values of the type, so no lane takes a slow
// path (NaN, denormals) on the way.
std::vector<uint8_t> makeBuffer(ncclDataType_t type, size_t bytes, uint8_t seed) {
  std::vector<uint8_t> buf(bytes);
  const size_t size = braid::reduce::typeSize(type);
  const size_t count = bytes / size;
  for (size_t i = 0; i < count; ++i) {
    uint8_t* p = &buf[i * size];
    const uint32_t k = uint32_t(i * 7 + seed) % 16;
    switch (type) {
      case ncclFloat32: {
        const float v = float(k) * 0.25f;
        std::memcpy(p, &v, 4);
        break;
      }
      case ncclFloat64: {
        const double v = double(k) * 0.25;
        std::memcpy(p, &v, 8);
        break;
      }
      case ncclFloat16: {
        const uint16_t v = uint16_t(0x3c00 + k);  // 1.0 .. 1.015
        std::memcpy(p, &v, 2);
        break;
      }
      case ncclBfloat16: {
        const uint16_t v = uint16_t(0x3f80 + k);
        std::memcpy(p, &v, 2);
        break;
      }
      case ncclFloat8e4m3:
      case ncclFloat8e5m2: *p = uint8_t(0x30 + k); break;
      default: std::memset(p, int(k), size); break;
    }
  }
  return buf;
}

void setRate(benchmark::State& state, size_t outBytes) {
  state.counters["GB/s"] =
      benchmark::Counter(double(outBytes) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Reduce(benchmark::State& state) {
  const auto type = ncclDataType_t(state.range(0));
  const size_t bytes = size_t(state.range(1));
  const size_t count = bytes / braid::reduce::typeSize(type);
  const braid::reduce::RedOp op = braid::reduce::makeBuiltinOp(ncclSum, type, 2);
  std::vector<uint8_t> a = makeBuffer(type, bytes, 1), b = makeBuffer(type, bytes, 2);
  std::vector<uint8_t> dst(bytes, 0);
  for (auto _ : state) {
    braid::reduce::hostReduce(op, dst.data(), a.data(), b.data(), count, true, false);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  setRate(state, bytes);
  state.SetLabel(braid::reduce::typeName(type));
}

void BM_ReduceInPlace(benchmark::State& state) {
  const auto type = ncclDataType_t(state.range(0));
  const size_t bytes = size_t(state.range(1));
  const size_t count = bytes / braid::reduce::typeSize(type);
  const braid::reduce::RedOp op = braid::reduce::makeBuiltinOp(ncclSum, type, 2);
  // Adding zeros keeps the accumulator's values (and their cost) steady.
  std::vector<uint8_t> acc = makeBuffer(type, bytes, 1), zeros(bytes, 0);
  for (auto _ : state) {
    braid::reduce::hostReduce(op, acc.data(), acc.data(), zeros.data(), count, true, false);
    benchmark::DoNotOptimize(acc.data());
    benchmark::ClobberMemory();
  }
  setRate(state, bytes);
  state.SetLabel(braid::reduce::typeName(type));
}

void BM_Memcpy(benchmark::State& state) {
  const size_t bytes = size_t(state.range(0));
  std::vector<uint8_t> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  setRate(state, bytes);
}

void typesAndSizes(benchmark::internal::Benchmark* b) {
  for (int64_t bytes : {1 * kMiB, 64 * kMiB}) {
    for (int t = 0; t < int(ncclNumTypes); ++t) b->Args({t, bytes});
  }
}

BENCHMARK(BM_Memcpy)->Arg(1 * kMiB)->Arg(64 * kMiB)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Reduce)->Apply(typesAndSizes)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReduceInPlace)->Apply(typesAndSizes)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
