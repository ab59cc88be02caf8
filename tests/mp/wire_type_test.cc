// Wire types (braidCommSetWireType, BRAID_WIRE_TYPE): float32 sums whose
// messages travel as bfloat16, float16, fp8 e4m3 or fp8 e5m2 (and bfloat16
// sums under the fp8 ones), through every
// algorithm, 1-4 channels, both protocols, shared memory and TCP, 2 to 8
// ranks. Every rank of an allreduce gets the same bits; sums whose every
// partial the wire type holds exactly (small integers times gradient-sized
// powers of two, which unscaled fp8 would flush to zero) come out exact;
// other sums within the stated bound; infinities and NaN as IEEE says; other
// datatypes and reductions unchanged; ranks that disagree on the wire type
// fail instead of mixing formats.
#include <nccl.h>
// braid.h after nccl.h: its extensions take NCCL's types.
#include <braid.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/mp_harness.h"
#include "common/mp_nccl.h"

namespace {

constexpr size_t kCount = 1031;  // 33 groups of 32, the last one short

struct Wire {
  ncclDataType_t type;
  const char* name;  // BRAID_WIRE_TYPE's word
  double u;          // relative rounding of one narrowing (e4m3: e5m2's, for groups with an infinity)
  double q;          // its floor over the group's largest
};
const Wire kWires[] = {
    {ncclBfloat16, "bf16", std::ldexp(1.0, -8), 0},
    {ncclFloat16, "fp16", std::ldexp(1.0, -11), std::ldexp(1.0, -24) / 65504},
    {ncclFloat8e4m3, "fp8e4m3", std::ldexp(1.0, -3), std::ldexp(1.0, -9) / 448},
    {ncclFloat8e5m2, "fp8e5m2", std::ldexp(1.0, -3), std::ldexp(1.0, -16) / 57344},
};

// Exact on every wire type: -1, 0 or 1 times 2^e, e in [-24, -17] per element,
// so every partial sum is a small integer times 2^e (fp8 e5m2 holds those up to 4).
std::vector<float> exactContribution(int c, size_t n) {
  std::mt19937 rng(500u + unsigned(c));
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::ldexp(float(int(rng() % 3) - 1), -24 + int((i * 7) % 8));
  return v;
}

// Signs, magnitudes over 2^-10 .. 2^10, zeros, and at fixed places an infinity or a NaN.
std::vector<float> contribution(int c, size_t n) {
  std::mt19937 rng(1000u + unsigned(c));
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const float mant = 1.0f + float(rng() % (1u << 23)) / float(1u << 23);
    v[i] = (rng() % 7 == 0) ? 0.0f : std::ldexp(rng() % 2 ? mant : -mant, int(rng() % 21) - 10);
  }
  if (c == 0) v[7] = INFINITY, v[13] = NAN;
  if (c == 1) v[11] = -INFINITY, v[300] = INFINITY;
  if (c == 2) v[11] = INFINITY, v[300] = INFINITY;
  return v;
}

struct Config {
  int nranks;
  const char* transport;
  const char* algo;  // NCCL_ALGO, or null for the cost model's choice
  int channels;
  const char* proto;  // NCCL_PROTO, or null
  bool byEnv;         // BRAID_WIRE_TYPE (one type per run) instead of braidCommSetWireType
};

std::string fileOf(const std::string& dir, const char* call, const char* wire, int rank) {
  return dir + "/" + call + "_" + wire + "." + std::to_string(rank);
}

mptest::RankOptions optionsOf(const Config& c) {
  mptest::RankOptions opts = mptest::transportOptions(c.transport, 120);
  if (c.algo) opts.env.push_back({"NCCL_ALGO", c.algo});
  if (c.proto) opts.env.push_back({"NCCL_PROTO", c.proto});
  opts.env.push_back({"BRAID_NCHANNELS", std::to_string(c.channels)});
  if (c.byEnv) opts.env.push_back({"BRAID_WIRE_TYPE", "fp8e4m3"});
  return opts;
}

void runConfig(const Config& c, const std::string& dir) {
  mptest::runRanks(
      c.nranks,
      [c, dir](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        auto save = [&](const char* call, const char* wire, const void* p, size_t bytes) {
          std::ofstream(fileOf(dir, call, wire, rank), std::ios::binary)
              .write(static_cast<const char*>(p), std::streamsize(bytes));
        };
        for (const Wire& w : kWires) {
          if (c.byEnv && std::strcmp(w.name, "fp8e4m3") != 0) continue;
          if (!c.byEnv) MP_NCCL_CHECK(braidCommSetWireType(comm, w.type));
          std::vector<float> exact = exactContribution(rank, kCount);
          MP_NCCL_CHECK(ncclAllReduce(exact.data(), exact.data(), kCount, ncclFloat32, ncclSum, comm, nullptr));
          save("exact", w.name, exact.data(), kCount * 4);
          std::vector<float> buf = contribution(rank, kCount);
          MP_NCCL_CHECK(ncclAllReduce(buf.data(), buf.data(), kCount, ncclFloat32, ncclSum, comm, nullptr));
          save("allreduce", w.name, buf.data(), kCount * 4);
          std::vector<float> in = contribution(rank, kCount * size_t(nranks)), out(kCount);
          MP_NCCL_CHECK(ncclReduceScatter(in.data(), out.data(), kCount, ncclFloat32, ncclSum, comm, nullptr));
          save("reducescatter", w.name, out.data(), kCount * 4);
          std::vector<float> mine = contribution(rank, kCount), avg(kCount);
          MP_NCCL_CHECK(ncclReduce(mine.data(), avg.data(), kCount, ncclFloat32, ncclAvg, nranks - 1, comm, nullptr));
          if (rank == nranks - 1) save("reduce", w.name, avg.data(), kCount * 4);
        }
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      optionsOf(c));
}

std::vector<float> readFloats(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<float> v(kCount);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(kCount * 4));
  EXPECT_TRUE(f.good()) << path;
  return v;
}

// The exact sums of the contributions of ranks 0..n-1 at elements
// [first, first + count) of contribution(...) of `all` elements, and the sum of magnitudes.
struct Exact {
  std::vector<long double> sum;
  std::vector<double> magnitude;
};
Exact exactSums(int n, size_t all, size_t first, size_t count) {
  Exact e{std::vector<long double>(count, 0), std::vector<double>(count, 0)};
  for (int c = 0; c < n; ++c) {
    const std::vector<float> v = contribution(c, all);
    for (size_t i = 0; i < count; ++i) e.sum[i] += v[first + i], e.magnitude[i] += std::fabs(double(v[first + i]));
  }
  return e;
}

// Each of at most n + 1 narrowings (n - 1 hops, the tree's depth or fewer,
// and the owner's final) errs by u|partial| + q * the group's largest partial;
// a partial is at most the sum of magnitudes grown by (1 + u) per hop.
void expectWithinBound(const std::vector<float>& got, const Exact& e, const Wire& w, int n, double divisor,
                       const std::string& what) {
  const double grow = std::pow(1 + w.u, n + 1);
  for (size_t i = 0; i < got.size(); ++i) {
    const long double exact = e.sum[i] / divisor;
    if (std::isnan(double(exact))) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " element " << i << ": " << got[i];
      continue;
    }
    if (std::isinf(double(exact))) {
      EXPECT_EQ(got[i], float(exact)) << what << " element " << i;
      continue;
    }
    double window = 0;
    for (size_t j = i >= 31 ? i - 31 : 0; j < std::min(got.size(), i + 32); ++j)
      if (std::isfinite(e.magnitude[j])) window = std::max(window, e.magnitude[j]);
    const double bound =
        ((n + 1) * (w.u * e.magnitude[i] + w.q * window) * grow + std::ldexp(e.magnitude[i], -22)) / divisor;
    ASSERT_LE(std::fabs(double(got[i] - exact)), bound) << what << " element " << i;
  }
}

TEST(MpWireType, EveryPlanSameBitsOnEveryRankWithinTheBound) {
  // halvingdoubling runs with its pieces on the wire's groups (CollShape::align:
  // without it, "bits differ"); recursivedoubling with its partners keeping
  // what they send (Step::keepsWire: without it, "bits differ"), powers of two
  // and not (a folded rank gets the core's narrowing); direct has no allreduce
  // (the ring runs).
  const Config configs[] = {
      {2, "shm", "ring", 1, "simple", false},          {3, "shm", "tree", 2, "ll", false},
      {4, "tcp", "halvingdoubling", 3, "simple", false}, {5, "shm", "halvingdoubling", 4, "ll", false},
      {8, "tcp", "ring", 2, "ll", false},              {4, "shm", nullptr, 1, nullptr, true},
      {8, "shm", "tree", 4, "simple", false},          {3, "tcp", "ring", 1, "ll", false},
      {5, "tcp", "tree", 3, "simple", false},          {4, "tcp", "direct", 2, "simple", false},
      {6, "shm", "direct", 1, "ll", false},            {4, "shm", "recursivedoubling", 1, "simple", false},
      {3, "tcp", "recursivedoubling", 1, "ll", false}, {6, "shm", "recursivedoubling", 2, "ll", false},
      {8, "tcp", "recursivedoubling", 2, "simple", false},
  };
  char dirTemplate[] = "/tmp/braid_wire_XXXXXX";
  ASSERT_NE(mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;
  for (const Config& c : configs) {
    SCOPED_TRACE(std::to_string(c.nranks) + " ranks, " + c.transport + ", NCCL_ALGO=" + (c.algo ? c.algo : "-") +
                 ", " + std::to_string(c.channels) + " channels, NCCL_PROTO=" + (c.proto ? c.proto : "-") +
                 (c.byEnv ? ", BRAID_WIRE_TYPE=fp8e4m3" : ""));
    runConfig(c, dir);
    const int n = c.nranks;
    for (const Wire& w : kWires) {
      if (c.byEnv && std::strcmp(w.name, "fp8e4m3") != 0) continue;
      SCOPED_TRACE(w.name);
      std::vector<float> exactSum(kCount, 0);
      for (int r = 0; r < n; ++r) {
        const std::vector<float> v = exactContribution(r, kCount);
        for (size_t i = 0; i < kCount; ++i) exactSum[i] += v[i];
      }
      const std::vector<float> first = readFloats(fileOf(dir, "allreduce", w.name, 0));
      for (int r = 0; r < n; ++r) {
        const std::vector<float> got = readFloats(fileOf(dir, "allreduce", w.name, r));
        EXPECT_EQ(std::memcmp(got.data(), first.data(), kCount * 4), 0) << "rank " << r << "'s bits differ from rank 0's";
        if (w.type != ncclFloat8e5m2 || n <= 4) {
          EXPECT_EQ(readFloats(fileOf(dir, "exact", w.name, r)), exactSum) << "exact sums, rank " << r;
        }
        expectWithinBound(got, exactSums(n, kCount, 0, kCount), w, n, 1, "allreduce rank " + std::to_string(r));
        expectWithinBound(readFloats(fileOf(dir, "reducescatter", w.name, r)),
                          exactSums(n, kCount * size_t(n), kCount * size_t(r), kCount), w, n, 1,
                          "reduce-scatter rank " + std::to_string(r));
      }
      expectWithinBound(readFloats(fileOf(dir, "reduce", w.name, n - 1)), exactSums(n, kCount, 0, kCount), w, n, n,
                        "reduce avg");
      for (int r = 0; r < n; ++r)
        for (const char* call : {"exact", "allreduce", "reducescatter", "reduce"})
          unlink(fileOf(dir, call, w.name, r).c_str());
    }
  }
  rmdir(dir.c_str());
}

// With a wire type set, a float32 max and an int32 sum are exact as without
// one (the wire type covers float32 sums and averages only). A type that is no
// wire type is refused with a message. braidWireRoundTrip rounds as the wire.
TEST(MpWireType, OtherCallsUnchangedBadTypeRefused) {
  mptest::runRanks(
      3,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        MP_EXPECT(braidCommSetWireType(comm, ncclInt32) == ncclInvalidArgument, "rank %d: int32 accepted", rank);
        MP_EXPECT(std::strstr(ncclGetLastError(comm), "not a wire type") != nullptr, "rank %d: message '%s'", rank,
                  ncclGetLastError(comm));
        // braidWireRoundTrip: 1 + 2^-8 is a tie between two bf16 values and rounds to
        // the even one, 1; gradient-sized values keep fp8's three mantissa bits
        // (scaled: unscaled e4m3 would flush them to 0).
        const float values[2] = {1.00390625f, 3.0f}, small[2] = {1.5e-7f, -2.5e-7f};
        float back[2] = {};
        MP_NCCL_CHECK(braidWireRoundTrip(values, back, 2, ncclBfloat16));
        MP_EXPECT(back[0] == 1.0f && back[1] == 3.0f, "rank %d: bf16 round trip %g %g", rank, double(back[0]),
                  double(back[1]));
        MP_NCCL_CHECK(braidWireRoundTrip(small, back, 2, ncclFloat8e4m3));
        MP_EXPECT(std::fabs(back[0] - small[0]) <= 1.5e-7f / 16 && std::fabs(back[1] - small[1]) <= 2.5e-7f / 16,
                  "rank %d: fp8 round trip %g %g", rank, double(back[0]), double(back[1]));
        MP_EXPECT(braidWireRoundTrip(nullptr, back, 2, ncclBfloat16) == ncclInvalidArgument, "rank %d: NULL", rank);
        MP_EXPECT(braidWireRoundTrip(values, back, 2, ncclInt8) == ncclInvalidArgument, "rank %d: int8", rank);
        MP_NCCL_CHECK(braidCommSetWireType(comm, ncclFloat8e4m3));
        std::vector<float> m(100);
        for (size_t i = 0; i < m.size(); ++i) m[i] = 1.0f + float(rank) / 3.0f + float(i) * 1e-7f;
        MP_NCCL_CHECK(ncclAllReduce(m.data(), m.data(), m.size(), ncclFloat32, ncclMax, comm, nullptr));
        MP_EXPECT(m[9] == 1.0f + 2.0f / 3.0f + 9 * 1e-7f, "rank %d: float32 max %.9g", rank, double(m[9]));
        std::vector<int32_t> i(64, rank + 1000000);
        MP_NCCL_CHECK(ncclAllReduce(i.data(), i.data(), i.size(), ncclInt32, ncclSum, comm, nullptr));
        MP_EXPECT(i[5] == 3000003, "rank %d: int32 sum %d", rank, i[5]);
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      mptest::transportOptions("shm", 60));
}

// bfloat16 values under an fp8 wire: widened to float, summed in float,
// narrowed to fp8 for every message, stored once as bfloat16.
uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return uint16_t((u >> 16) | 0x40);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
float fromBf16(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
std::vector<uint16_t> toBf16(const std::vector<float>& v) {
  std::vector<uint16_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = toBf16(v[i]);
  return b;
}
std::vector<float> fromBf16(const std::vector<uint16_t>& b) {
  std::vector<float> v(b.size());
  for (size_t i = 0; i < b.size(); ++i) v[i] = fromBf16(b[i]);
  return v;
}

// What rank `c` contributes as bfloat16, back in float (the sums' reference).
std::vector<float> bf16Contribution(int c, size_t n) { return fromBf16(toBf16(contribution(c, n))); }

void runBf16Config(const Config& c, const std::string& dir) {
  mptest::runRanks(
      c.nranks,
      [dir](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        auto save = [&](const char* call, const char* wire, const std::vector<uint16_t>& v) {
          std::ofstream(fileOf(dir, call, wire, rank), std::ios::binary)
              .write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 2));
        };
        // Under a bfloat16 wire, bfloat16 sums run as without one (the wire is no narrower).
        std::vector<uint16_t> plain = toBf16(contribution(rank, kCount)), viaBf16Wire = plain;
        MP_NCCL_CHECK(ncclAllReduce(plain.data(), plain.data(), kCount, ncclBfloat16, ncclSum, comm, nullptr));
        MP_NCCL_CHECK(braidCommSetWireType(comm, ncclBfloat16));
        MP_NCCL_CHECK(
            ncclAllReduce(viaBf16Wire.data(), viaBf16Wire.data(), kCount, ncclBfloat16, ncclSum, comm, nullptr));
        MP_EXPECT(plain == viaBf16Wire, "rank %d: a bfloat16 wire changed a bfloat16 sum", rank);
        for (const Wire& w : kWires) {
          if (w.type != ncclFloat8e4m3 && w.type != ncclFloat8e5m2) continue;
          MP_NCCL_CHECK(braidCommSetWireType(comm, w.type));
          std::vector<uint16_t> exact = toBf16(exactContribution(rank, kCount));
          MP_NCCL_CHECK(ncclAllReduce(exact.data(), exact.data(), kCount, ncclBfloat16, ncclSum, comm, nullptr));
          save("exact", w.name, exact);
          std::vector<uint16_t> buf = toBf16(contribution(rank, kCount));
          MP_NCCL_CHECK(ncclAllReduce(buf.data(), buf.data(), kCount, ncclBfloat16, ncclSum, comm, nullptr));
          save("allreduce", w.name, buf);
          std::vector<uint16_t> in = toBf16(contribution(rank, kCount * size_t(nranks))), out(kCount);
          MP_NCCL_CHECK(ncclReduceScatter(in.data(), out.data(), kCount, ncclBfloat16, ncclAvg, comm, nullptr));
          save("reducescatter", w.name, out);
        }
        MP_NCCL_CHECK(ncclCommDestroy(comm));
      },
      optionsOf(c));
}

std::vector<uint16_t> readBf16(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<uint16_t> v(kCount);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(kCount * 2));
  EXPECT_TRUE(f.good()) << path;
  return v;
}

// The reference sums of what the ranks contributed as bfloat16.
Exact bf16Sums(int n, size_t all, size_t first, size_t count) {
  Exact e{std::vector<long double>(count, 0), std::vector<double>(count, 0)};
  for (int c = 0; c < n; ++c) {
    const std::vector<float> v = bf16Contribution(c, all);
    for (size_t i = 0; i < count; ++i) e.sum[i] += v[first + i], e.magnitude[i] += std::fabs(double(v[first + i]));
  }
  return e;
}

// Significant bits of a finite non-zero value (a code of fp8 e4m3 has at
// most 4, of e5m2 at most 3, whatever its group's scale).
int significantBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t m = u & 0x7fffffu;
  if ((u & 0x7f800000u) != 0) m |= 0x800000u;
  int top = 31 - __builtin_clz(m), low = __builtin_ctz(m);
  return top - low + 1;
}

TEST(MpWireType, Bfloat16ValuesOverFp8SameBitsOnEveryRankWithinTheBound) {
  // At most 4 ranks: e5m2 holds every partial of the exact sums up to 4.
  const Config configs[] = {
      {3, "shm", "ring", 2, "ll", false},
      {4, "tcp", "tree", 1, "simple", false},
      {2, "shm", nullptr, 3, nullptr, false},
      {3, "tcp", "recursivedoubling", 1, "ll", false},
  };
  char dirTemplate[] = "/tmp/braid_wire_bf16_XXXXXX";
  ASSERT_NE(mkdtemp(dirTemplate), nullptr);
  const std::string dir = dirTemplate;
  for (const Config& c : configs) {
    SCOPED_TRACE(std::to_string(c.nranks) + " ranks, " + c.transport + ", NCCL_ALGO=" + (c.algo ? c.algo : "-"));
    runBf16Config(c, dir);
    const int n = c.nranks;
    for (const Wire& w : kWires) {
      if (w.type != ncclFloat8e4m3 && w.type != ncclFloat8e5m2) continue;
      SCOPED_TRACE(w.name);
      std::vector<float> exactSum(kCount, 0);
      for (int r = 0; r < n; ++r) {
        const std::vector<float> v = exactContribution(r, kCount);
        for (size_t i = 0; i < kCount; ++i) exactSum[i] += v[i];
      }
      const std::vector<uint16_t> first = readBf16(fileOf(dir, "allreduce", w.name, 0));
      for (int r = 0; r < n; ++r) {
        const std::vector<uint16_t> got = readBf16(fileOf(dir, "allreduce", w.name, r));
        EXPECT_EQ(got, first) << "rank " << r << "'s bits differ from rank 0's";
        // The results are the owner's fp8 narrowing: bfloat16 sums would keep up to 8 bits.
        const int wireBits = w.type == ncclFloat8e4m3 ? 4 : 3;
        for (size_t i = 0; i < kCount; ++i) {
          const float v = fromBf16(got[i]);
          if (std::isfinite(v) && v != 0) {
            ASSERT_LE(significantBits(v), wireBits) << "element " << i << ": " << v;
          }
        }
        EXPECT_EQ(fromBf16(readBf16(fileOf(dir, "exact", w.name, r))), exactSum) << "exact sums, rank " << r;
        expectWithinBound(fromBf16(got), bf16Sums(n, kCount, 0, kCount), w, n, 1,
                          "allreduce rank " + std::to_string(r));
        // The average is stored once as bfloat16: one more rounding (2^-9) than the wire's bound.
        Exact avg = bf16Sums(n, kCount * size_t(n), kCount * size_t(r), kCount);
        Wire stored = w;
        stored.u += std::ldexp(1.0, -9);
        expectWithinBound(fromBf16(readBf16(fileOf(dir, "reducescatter", w.name, r))), avg, stored, n, n,
                          "reduce-scatter avg rank " + std::to_string(r));
      }
      for (int r = 0; r < n; ++r)
        for (const char* call : {"exact", "allreduce", "reducescatter"}) unlink(fileOf(dir, call, w.name, r).c_str());
    }
  }
  rmdir(dir.c_str());
}

// One rank with bfloat16 messages, the others with float32: every rank fails
// with ncclInvalidUsage, none returns mixed data.
TEST(MpWireType, RanksThatDisagreeFail) {
  mptest::runRanks(
      2,
      [](int rank, int nranks, const ncclUniqueId& id) {
        ncclComm_t comm = nullptr;
        MP_NCCL_CHECK(ncclCommInitRank(&comm, nranks, id, rank));
        if (rank == 0) MP_NCCL_CHECK(braidCommSetWireType(comm, ncclBfloat16));
        std::vector<float> v(4096, 1.0f);
        const ncclResult_t r = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr);
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(comm, &async);
        MP_EXPECT(r == ncclInvalidUsage || async == ncclInvalidUsage, "rank %d: result %d, async %d", rank, int(r),
                  int(async));
        ncclCommAbort(comm);
      },
      mptest::transportOptions("shm", 60));
}

}  // namespace
