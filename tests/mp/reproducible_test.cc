// Reproducible mode (core/reproducible.h): the same contributions, handed to
// the ranks in shuffled orders, through every algorithm, 1-4 channels, both
// protocols, shared memory and TCP, 2 to 8 ranks, give identical bits, equal
// to a single sequential implementation of the same accumulation; the error
// against an exact sum is within the stated bound and no worse than an
// ordinary float32 sum's; NaN and infinities come out as IEEE says.
#include <nccl.h>
// braid.h after nccl.h: its extensions take NCCL's types.
#include <braid.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "common/mp_harness.h"
#include "common/mp_nccl.h"
#include "core/reproducible.h"
#include "reduce/numeric.h"

namespace {

namespace rep = braid::core::reproducible;

constexpr size_t kCount = 1031;  // five blocks, the last one short
// An allreduce large enough to be summed by a reduce-scatter and gathered
// (4096 elements a rank and more, up to 8 ranks), with elements left over
// for most rank counts.
constexpr size_t kLargeCount = 8 * 4096 + 5;
constexpr int kMaxRanks = 8;

// Contribution c of `n` elements: signs, magnitudes over 2^-15 .. 2^15 (an
// exact long double sum for up to 8 of them), a few zeros, and at fixed
// places an infinity or a NaN.
std::vector<float> contribution(int c, size_t n) {
  std::mt19937 rng(1000u + unsigned(c));
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const float mant = 1.0f + float(rng() % (1u << 23)) / float(1u << 23);
    const int exp = int(rng() % 31) - 15;
    v[i] = (rng() % 7 == 0) ? 0.0f : std::ldexp(rng() % 2 ? mant : -mant, exp);
  }
  const float inf = INFINITY;
  if (c == 0) v[7] = inf, v[13] = NAN;   // +inf alone: +inf; NaN: NaN
  if (c == 1) v[11] = -inf, v[300] = inf;
  if (c == 2) v[11] = inf, v[300] = inf;  // -inf and +inf: NaN; two +inf: +inf
  if (c == 1 && n > kCount) v[n - 1] = NAN;  // among the elements left over
  return v;
}

// The same without its infinities and NaN, and with blocks of different
// largest exponents (each block's values scaled by its own power of two):
// such calls sum inside the ring reduce-scatter's steps (fixed-point
// messages, each block at its own shift) where the plan allows it.
std::vector<float> finiteContribution(int c, size_t n) {
  std::vector<float> v = contribution(c, n);
  for (size_t i = 0; i < n; ++i)
    v[i] = std::isfinite(v[i]) ? std::ldexp(v[i], int(i / rep::kBlockElems % 5) * 3 - 6) : 1.5f;
  return v;
}

template <class T>
std::vector<T> convert(const std::vector<float>& v, ncclDataType_t type) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if constexpr (std::is_same_v<T, braid::reduce::Half>) out[i] = braid::reduce::toHalf(v[i]);
    else if constexpr (std::is_same_v<T, braid::reduce::BFloat16>) out[i] = braid::reduce::toBFloat16(v[i]);
    else out[i] = T(v[i]);
  }
  (void)type;
  return out;
}

// The single sequential implementation: one loop over the contributions.
std::vector<unsigned char> reference(const std::vector<std::vector<unsigned char>>& contribs, ncclDataType_t type,
                                     size_t all, size_t first, size_t results, int divisor) {
  const int n = int(contribs.size());
  const size_t blocks = (all + rep::kBlockElems - 1) / rep::kBlockElems;
  std::vector<int32_t> words(2 * blocks, 0), mine(2 * blocks);
  for (size_t b = 0; b < blocks; ++b) words[2 * b] = rep::kNoExponent;
  for (const auto& c : contribs) {
    rep::blockExponents(c.data(), type, all, mine.data());
    for (size_t k = 0; k < words.size(); ++k) words[k] = std::max(words[k], mine[k]);
  }
  std::vector<int64_t> sums(all, 0), codeSums(all, 0), fixed(all), codes(all);
  for (const auto& c : contribs) {
    rep::toFixed(c.data(), type, all, words.data(), n, fixed.data());
    rep::specialCodes(c.data(), type, all, codes.data());
    for (size_t i = 0; i < all; ++i) sums[i] += fixed[i], codeSums[i] += codes[i];
  }
  std::vector<unsigned char> out(results * braid::reduce::typeSize(type));
  rep::fromFixed(sums.data() + first, codeSums.data() + first, type, results, first, words.data(), n, divisor,
                 out.data());
  return out;
}

struct Config {
  int nranks;
  const char* transport;
  const char* algo;  // NCCL_ALGO, or null for the cost model's choice
  int channels;
  const char* proto;  // NCCL_PROTO, or null
  unsigned shuffle;   // which contribution each rank holds
  bool byEnv;         // BRAID_REPRODUCIBLE=1 instead of braidCommSetReproducible
};

std::vector<int> holdings(const Config& c) {
  std::vector<int> perm(size_t(c.nranks));
  for (int r = 0; r < c.nranks; ++r) perm[size_t(r)] = r;
  std::mt19937 rng(c.shuffle);
  std::shuffle(perm.begin(), perm.end(), rng);
  return perm;
}

std::vector<unsigned char> bytesOf(const std::vector<float>& v, ncclDataType_t type) {
  std::vector<unsigned char> out(v.size() * braid::reduce::typeSize(type));
  switch (type) {
    case ncclFloat32: std::memcpy(out.data(), v.data(), out.size()); break;
    case ncclFloat64: { auto d = convert<double>(v, type); std::memcpy(out.data(), d.data(), out.size()); break; }
    case ncclFloat16: { auto h = convert<braid::reduce::Half>(v, type); std::memcpy(out.data(), h.data(), out.size()); break; }
    default: { auto b = convert<braid::reduce::BFloat16>(v, type); std::memcpy(out.data(), b.data(), out.size()); break; }
  }
  return out;
}

// The calls of one run, each rank writing what it got to dir/<call>.<rank>.
void runConfig(const Config& c, const std::string& dir) {
  mptest::RankOptions opts = mptest::transportOptions(c.transport, 120);
  if (c.algo) opts.env.push_back({"NCCL_ALGO", c.algo});
  if (c.proto) opts.env.push_back({"NCCL_PROTO", c.proto});
  opts.env.push_back({"BRAID_NCHANNELS", std::to_string(c.channels)});
  if (c.byEnv) opts.env.push_back({"BRAID_REPRODUCIBLE", "1"});
  const std::vector<int> held = holdings(c);
  mptest::runRanks(
      c.nranks,
      [c, dir, held](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        if (!c.byEnv) MP_NCCL_CHECK(braidCommSetReproducible(comm, 1));
        const int mine = held[size_t(rank)];
        auto save = [&](const char* call, const void* p, size_t bytes) {
          std::ofstream(dir + "/" + call + "." + std::to_string(rank), std::ios::binary)
              .write(static_cast<const char*>(p), std::streamsize(bytes));
        };
        // AllReduce sum, float32 and bfloat16 (in place).
        for (ncclDataType_t type : {ncclFloat32, ncclBfloat16}) {
          std::vector<unsigned char> buf = bytesOf(contribution(mine, kCount), type);
          MP_NCCL_CHECK(ncclAllReduce(buf.data(), buf.data(), kCount, type, ncclSum, comm, nullptr));
          save(type == ncclFloat32 ? "allreduce_f32" : "allreduce_bf16", buf.data(), buf.size());
        }
        // AllReduce avg, float32, out of place, large.
        {
          const std::vector<float> in = contribution(mine, kLargeCount);
          std::vector<float> out(kLargeCount);
          MP_NCCL_CHECK(ncclAllReduce(in.data(), out.data(), kLargeCount, ncclFloat32, ncclAvg, comm, nullptr));
          save("allreduce_f32_large", out.data(), out.size() * sizeof(float));
        }
        // Finite float32 (summed in the ring's steps where it runs): a large
        // allreduce sum in place, and a reduce-scatter avg out of place whose
        // ranks' shares start inside a block.
        {
          // Twice: the second call, of the same shape, reruns the first's
          // kept plan with its own blocks' shifts (here all 2^12 apart).
          std::vector<float> buf = finiteContribution(mine, kLargeCount);
          for (float& x : buf) x = std::ldexp(x, 12);
          MP_NCCL_CHECK(ncclAllReduce(buf.data(), buf.data(), kLargeCount, ncclFloat32, ncclSum, comm, nullptr));
          buf = finiteContribution(mine, kLargeCount);
          MP_NCCL_CHECK(ncclAllReduce(buf.data(), buf.data(), kLargeCount, ncclFloat32, ncclSum, comm, nullptr));
          save("allreduce_f32_finite", buf.data(), buf.size() * sizeof(float));
          const std::vector<float> in = finiteContribution(mine, kCount * size_t(nranks));
          std::vector<float> out(kCount);
          MP_NCCL_CHECK(ncclReduceScatter(in.data(), out.data(), kCount, ncclFloat32, ncclAvg, comm, nullptr));
          save("reducescatter_f32_finite", out.data(), out.size() * sizeof(float));
        }
        // ReduceScatter sum, float64.
        {
          std::vector<unsigned char> in = bytesOf(contribution(mine, kCount * size_t(nranks)), ncclFloat64);
          std::vector<unsigned char> out(kCount * sizeof(double));
          MP_NCCL_CHECK(ncclReduceScatter(in.data(), out.data(), kCount, ncclFloat64, ncclSum, comm, nullptr));
          save("reducescatter_f64", out.data(), out.size());
        }
        // Reduce avg to the last rank, float16.
        {
          std::vector<unsigned char> in = bytesOf(contribution(mine, kCount), ncclFloat16), out(in.size());
          MP_NCCL_CHECK(ncclReduce(in.data(), out.data(), kCount, ncclFloat16, ncclAvg, nranks - 1, comm, nullptr));
          if (rank == nranks - 1) save("reduce_f16", out.data(), out.size());
        }
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      opts);
}

std::vector<unsigned char> readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<unsigned char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::vector<std::vector<unsigned char>> contributions(int n, size_t count, ncclDataType_t type,
                                                     bool finite = false) {
  std::vector<std::vector<unsigned char>> out;
  for (int c = 0; c < n; ++c)
    out.push_back(bytesOf(finite ? finiteContribution(c, count) : contribution(c, count), type));
  return out;
}

TEST(MpReproducible, EveryPlanGivesTheReferenceBits) {
  const Config configs[] = {
      {2, "shm", "ring", 1, "simple", 1, false},    {3, "shm", "tree", 2, "ll", 2, false},
      {4, "tcp", "recursivedoubling", 3, "simple", 3, false}, {5, "shm", "halvingdoubling", 4, "ll", 4, false},
      {8, "tcp", "ring", 2, "ll", 5, false},        {4, "shm", nullptr, 1, nullptr, 6, true},
      {8, "shm", "tree", 4, "simple", 7, false},    {3, "tcp", "ring", 1, "ll", 8, false},
      {4, "shm", "ring", 4, "ll", 9, false},        {5, "tcp", "tree", 3, "simple", 10, false},
      {4, "tcp", "direct", 2, "simple", 11, false}, {6, "shm", "direct", 1, "ll", 12, false},
  };
  char dirTemplate[] = "/tmp/braid_reproducible_XXXXXX";
  ASSERT_NE(mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;
  for (const Config& c : configs) {
    SCOPED_TRACE(std::to_string(c.nranks) + " ranks, " + c.transport + ", NCCL_ALGO=" + (c.algo ? c.algo : "-") +
                 ", " + std::to_string(c.channels) + " channels, NCCL_PROTO=" + (c.proto ? c.proto : "-") +
                 (c.byEnv ? ", BRAID_REPRODUCIBLE=1" : ""));
    runConfig(c, dir);
    const int n = c.nranks;
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(readFile(dir + "/allreduce_f32." + std::to_string(r)),
                reference(contributions(n, kCount, ncclFloat32), ncclFloat32, kCount, 0, kCount, 1))
          << "allreduce float32, rank " << r;
      EXPECT_EQ(readFile(dir + "/allreduce_bf16." + std::to_string(r)),
                reference(contributions(n, kCount, ncclBfloat16), ncclBfloat16, kCount, 0, kCount, 1))
          << "allreduce bfloat16, rank " << r;
      EXPECT_EQ(readFile(dir + "/allreduce_f32_large." + std::to_string(r)),
                reference(contributions(n, kLargeCount, ncclFloat32), ncclFloat32, kLargeCount, 0, kLargeCount, n))
          << "allreduce avg float32, " << kLargeCount << " elements, rank " << r;
      EXPECT_EQ(readFile(dir + "/allreduce_f32_finite." + std::to_string(r)),
                reference(contributions(n, kLargeCount, ncclFloat32, true), ncclFloat32, kLargeCount, 0,
                          kLargeCount, 1))
          << "allreduce float32 without inf or NaN, " << kLargeCount << " elements, rank " << r;
      EXPECT_EQ(readFile(dir + "/reducescatter_f32_finite." + std::to_string(r)),
                reference(contributions(n, kCount * size_t(n), ncclFloat32, true), ncclFloat32, kCount * size_t(n),
                          kCount * size_t(r), kCount, n))
          << "reduce-scatter avg float32 without inf or NaN, rank " << r;
      EXPECT_EQ(readFile(dir + "/reducescatter_f64." + std::to_string(r)),
                reference(contributions(n, kCount * size_t(n), ncclFloat64), ncclFloat64, kCount * size_t(n),
                          kCount * size_t(r), kCount, 1))
          << "reduce-scatter float64, rank " << r;
    }
    EXPECT_EQ(readFile(dir + "/reduce_f16." + std::to_string(n - 1)),
              reference(contributions(n, kCount, ncclFloat16), ncclFloat16, kCount, 0, kCount, n))
        << "reduce avg float16";
    for (int r = 0; r < n; ++r)
      for (const char* f : {"allreduce_f32.", "allreduce_bf16.", "allreduce_f32_large.", "allreduce_f32_finite.",
                            "reducescatter_f32_finite.", "reducescatter_f64.", "reduce_f16."})
        unlink((dir + "/" + f + std::to_string(r)).c_str());
  }
  rmdir(dir.c_str());
}

// Inside a group a reproducible call runs when the group ends, after the
// group's other calls, with the same bits as outside; other datatypes and ops
// are exact already and run unchanged (an int32 sum, a float32 max).
TEST(MpReproducible, InsideAGroupTheSameBitsOtherCallsUnchanged) {
  mptest::runRanks(
      3,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        MP_NCCL_CHECK(braidCommSetReproducible(comm, 1));
        MP_EXPECT(braidCommSetReproducible(comm, 2) == ncclInvalidArgument, "rank %d: on=2 accepted", rank);
        std::vector<float> alone = contribution(rank, kCount), grouped = alone;
        MP_NCCL_CHECK(ncclAllReduce(alone.data(), alone.data(), kCount, ncclFloat32, ncclSum, comm, nullptr));
        std::vector<int32_t> i(64, rank + 1);
        std::vector<float> m(64, float(rank));
        MP_NCCL_CHECK(ncclGroupStart());
        MP_NCCL_CHECK(ncclAllReduce(grouped.data(), grouped.data(), kCount, ncclFloat32, ncclSum, comm, nullptr));
        MP_NCCL_CHECK(ncclAllReduce(i.data(), i.data(), i.size(), ncclInt32, ncclSum, comm, nullptr));
        MP_NCCL_CHECK(ncclAllReduce(m.data(), m.data(), m.size(), ncclFloat32, ncclMax, comm, nullptr));
        MP_NCCL_CHECK(ncclGroupEnd());
        MP_EXPECT(std::memcmp(alone.data(), grouped.data(), kCount * sizeof(float)) == 0,
                  "rank %d: the grouped call's bits differ from the call alone", rank);
        MP_EXPECT(i[5] == 6, "rank %d: int32 sum %d", rank, i[5]);
        MP_EXPECT(m[5] == 2.0f, "rank %d: float32 max %g", rank, double(m[5]));
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      mptest::transportOptions("shm", 60));
}

// MXCSR bits a thread may set (x86-64): none, rounding toward zero, DAZ.
#if defined(__x86_64__)
constexpr unsigned kMxcsrModes[] = {0, 0x6000, 0x40};
template <class F>
void withMxcsr(unsigned modes, F f) {
  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | modes);
  f();
  _mm_setcsr(saved);
}
#else
constexpr unsigned kMxcsrModes[] = {0};
template <class F>
void withMxcsr(unsigned, F f) {
  f();
}
#endif

// Float32 to fixed point (AVX2's double lanes, else an integer loop, both
// written for the vector units): round(x * 2^s) to nearest even, computed
// here with the FPU (x * 2^s is exact in double, nearbyint rounds to nearest
// even), for random bit patterns and edge values at every shift the mode
// uses, for every value below its block's agreed largest; NaN and inf give 0.
// The same integers in a thread whose MXCSR rounds toward zero or reads
// subnormal inputs as zero (there the integer loop runs).
TEST(MpReproducible, Float32FixedPointIsTheScaledValueRoundedToNearestEven) {
  std::mt19937 rng(11);
  std::vector<uint32_t> bits(4096);
  for (int emax = -149; emax <= 127; ++emax) {
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = rng();
    const uint32_t edges[] = {0, 0x80000000u, 1, 0x80000001u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x007fffffu,
                              0x00800000u, 0x3f800000u, 0x3fc00000u, 0x3f400000u, 0x7f7fffffu};
    std::copy(std::begin(edges), std::end(edges), bits.begin());
    const int32_t words[2] = {emax, 0};
    std::vector<int64_t> fixed(rep::kBlockElems);
    for (size_t at = 0; at < bits.size(); at += rep::kBlockElems) {
      const int shift = rep::fixedPointShift(emax, 1, ncclFloat32);
      for (const unsigned mxcsr : kMxcsrModes) {
        withMxcsr(mxcsr, [&] { rep::toFixed(bits.data() + at, ncclFloat32, rep::kBlockElems, words, 1, fixed.data()); });
        for (size_t i = 0; i < rep::kBlockElems; ++i) {
          float x;
          std::memcpy(&x, &bits[at + i], sizeof x);
          if (std::isfinite(x) && std::fabs(x) >= std::ldexp(1.0f, emax + 1)) continue;  // past the block's largest
          const int64_t want = std::isfinite(x) ? int64_t(std::nearbyint(std::ldexp(double(x), shift))) : 0;
          ASSERT_EQ(fixed[i], want) << "bits " << std::hex << bits[at + i] << ", MXCSR modes " << mxcsr << std::dec
                                    << ", shift " << shift;
        }
      }
    }
  }
}

// Fixed point back to float32 (a loop written for the vector units, which
// have no 64-bit integer conversion): the int64 sum as a double (exact: a
// float32 sum stays below 2^51), times 2^-s over the divisor, to float; for
// random sums over the whole range and its extremes, sum and avg.
TEST(MpReproducible, FixedPointBackToFloat32IsTheExactSumScaled) {
  std::mt19937_64 rng(12);
  std::vector<int64_t> sums(4 * rep::kBlockElems);
  for (size_t i = 0; i < sums.size(); ++i) sums[i] = (int64_t(rng()) >> 13) >> (rng() % 51);
  const int64_t top = (int64_t(1) << 51) - 1;
  const int64_t edges[] = {0, 1, -1, top, -top, top - 1, -(top - 1), int64_t(1) << 50, -(int64_t(1) << 50),
                           int64_t(0xffffffff), -int64_t(0xffffffff), int64_t(0x100000000), -int64_t(0x100000000)};
  std::copy(std::begin(edges), std::end(edges), sums.begin());
  const int32_t emaxes[] = {-140, -20, 0, 3, 100, 120};
  for (const int32_t emax : emaxes) {
    for (const int divisor : {1, 3, 8}) {
      const int n = 8;
      std::vector<int32_t> words;
      for (size_t b = 0; b < sums.size() / rep::kBlockElems; ++b) words.insert(words.end(), {emax, 0});
      std::vector<float> got(sums.size());
      rep::fromFixed(sums.data(), nullptr, ncclFloat32, sums.size(), 0, words.data(), n, divisor, got.data());
      const double unscale = std::ldexp(1.0, -rep::fixedPointShift(emax, n, ncclFloat32)) / divisor;
      for (size_t i = 0; i < sums.size(); ++i) {
        const float want = static_cast<float>(static_cast<double>(sums[i]) * unscale);
        ASSERT_EQ(std::memcmp(&got[i], &want, sizeof want), 0)
            << "sum " << sums[i] << ", emax " << emax << ", divisor " << divisor << ": " << got[i] << " != " << want;
      }
    }
  }
}

// Against the exact sum (long double is exact for these 8 contributions):
// within |x - s| <= ulp(x) + n * 2^(e + 1 + ceil(log2 n) - 51) (e: the block's
// largest exponent; docs/algorithms.md), and no worse than a float32 sum in
// rank order; IEEE's results for the infinities and NaN.
TEST(MpReproducible, ErrorWithinTheBoundAndNoWorseThanAFloat32Sum) {
  const int n = kMaxRanks;
  const auto contribs = contributions(n, kCount, ncclFloat32);
  const auto got = reference(contribs, ncclFloat32, kCount, 0, kCount, 1);
  const float* x = reinterpret_cast<const float*>(got.data());
  double worstMine = 0, worstFloat = 0;
  // The largest finite magnitude of each block, over every contribution.
  std::vector<float> blockLargest((kCount + rep::kBlockElems - 1) / rep::kBlockElems, 0.0f);
  for (size_t i = 0; i < kCount; ++i)
    for (int c = 0; c < n; ++c) {
      const float v = reinterpret_cast<const float*>(contribs[size_t(c)].data())[i];
      float& m = blockLargest[i / rep::kBlockElems];
      if (std::isfinite(v)) m = std::max(m, std::fabs(v));
    }
  for (size_t i = 0; i < kCount; ++i) {
    long double exact = 0;
    float naive = 0;
    const float emaxValue = blockLargest[i / rep::kBlockElems];
    for (int c = 0; c < n; ++c) {
      const float v = reinterpret_cast<const float*>(contribs[size_t(c)].data())[i];
      exact += v, naive += v;
    }
    if (i == 7 || i == 300) {
      EXPECT_EQ(x[i], INFINITY) << i;
      continue;
    }
    if (i == 11 || i == 13) {
      EXPECT_TRUE(std::isnan(x[i])) << i;
      continue;
    }
    const double err = std::fabs(double(x[i] - exact));
    const double ulp = std::nextafter(std::fabs(x[i]), INFINITY) - std::fabs(x[i]);
    const double quantum = emaxValue == 0 ? 0 : std::ldexp(1.0, std::ilogb(emaxValue) + 1 + 3 - 51);  // float32: 51 bits
    EXPECT_LE(err, ulp + n * quantum) << "element " << i;
    worstMine = std::max(worstMine, err);
    worstFloat = std::max(worstFloat, std::fabs(double(naive - exact)));
  }
  EXPECT_LE(worstMine, worstFloat);
  std::printf("largest error: reproducible %.3g, float32 sum in rank order %.3g\n", worstMine, worstFloat);
}

}  // namespace
