// Device reductions (kernels/reduce) against the host reductions (src/reduce)
// for every datatype and operator, bit for bit, on random inputs that include
// NaN, infinities and subnormals. Without a CUDA device the tests that need one
// skip and say why.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/reduce/device_reduce.h"
#include "reduce/host_reduce.h"
#include "reduce/numeric.h"

namespace braid {
namespace {

// Larger than the launcher's largest grid (4096 x 256), so the kernel's
// grid-stride loop runs, and odd so no vector width divides it.
constexpr size_t kCount = (size_t(1) << 20) + 37;

struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DeviceBuffer = std::unique_ptr<void, CudaFree>;

DeviceBuffer deviceAlloc(size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes) != cudaSuccess) return DeviceBuffer();
  return DeviceBuffer(p);
}

std::string noGpuReason() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    return std::string("no CUDA GPU: cudaGetDeviceCount failed with ") + cudaGetErrorName(err) +
           " (" + cudaGetErrorString(err) + ")";
  }
  if (n == 0) return "no CUDA GPU: cudaGetDeviceCount found 0 devices";
  return "";
}

const ncclDataType_t kTypes[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                 ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                 ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

// Random elements of `type`: integers are uniform bit patterns; floating types
// are mostly moderate values (so sums and products stay finite and meaningful)
// plus 1 in 8 uniform bit patterns (NaN, infinity, subnormals, extremes).
std::vector<uint8_t> randomData(ncclDataType_t type, size_t n, std::mt19937_64& rng) {
  const size_t size = typeSize(type);
  std::vector<uint8_t> out(n * size);
  std::uniform_real_distribution<float> moderate(-6.0f, 6.0f);
  for (size_t i = 0; i < n; ++i) {
    uint64_t bits = rng();
    const bool raw = !isFloatingType(type) || (bits & 7) == 0;
    bits = rng();
    if (!raw) {
      const float f = moderate(rng);
      const double d = double(f) * (1.0 + 1e-9 * double(rng() % 1000));
      switch (type) {
        case ncclFloat16: bits = toHalf(f).bits; break;
        case ncclBfloat16: bits = toBFloat16(f).bits; break;
        case ncclFloat8e4m3: bits = toFp8E4M3(f).bits; break;
        case ncclFloat8e5m2: bits = toFp8E5M2(f).bits; break;
        case ncclFloat32: std::memcpy(&bits, &f, sizeof f); break;
        case ncclFloat64: std::memcpy(&bits, &d, sizeof d); break;
        default: break;
      }
    }
    std::memcpy(&out[i * size], &bits, size);  // little endian: the low bytes
  }
  return out;
}

// Two NaNs are equal whatever their payloads: x86 propagates an operand's NaN,
// a GPU produces the canonical one. Everything else must match bit for bit.
bool isNaN(ncclDataType_t type, const uint8_t* p) {
  switch (type) {
    case ncclFloat16: { Half h; std::memcpy(&h, p, 2); return std::isnan(toFloat(h)); }
    case ncclBfloat16: { BFloat16 h; std::memcpy(&h, p, 2); return std::isnan(toFloat(h)); }
    case ncclFloat8e4m3: return std::isnan(toFloat(Fp8E4M3{*p}));
    case ncclFloat8e5m2: return std::isnan(toFloat(Fp8E5M2{*p}));
    case ncclFloat32: { float f; std::memcpy(&f, p, 4); return std::isnan(f); }
    case ncclFloat64: { double d; std::memcpy(&d, p, 8); return std::isnan(d); }
    default: return false;
  }
}

// PreMulSum's scalar in `type`'s representation: 0.3 for floating types (not
// a power of two, so the product rounds), 3 for integers.
RedOp preMulSum(ncclDataType_t type) {
  uint8_t s[8] = {};
  const float f = 0.3f;
  const double d = 0.3;
  switch (type) {
    case ncclFloat16: { Half h = toHalf(f); std::memcpy(s, &h, 2); break; }
    case ncclBfloat16: { BFloat16 h = toBFloat16(f); std::memcpy(s, &h, 2); break; }
    case ncclFloat8e4m3: s[0] = toFp8E4M3(f).bits; break;
    case ncclFloat8e5m2: s[0] = toFp8E5M2(f).bits; break;
    case ncclFloat32: std::memcpy(s, &f, 4); break;
    case ncclFloat64: std::memcpy(s, &d, 8); break;
    default: s[0] = 3; break;  // little endian: 3 in every integer width
  }
  return makePreMulSum(type, s);
}

struct OpCase {
  std::string name;
  RedOp op;
  bool pre;
  bool post;
};

std::vector<OpCase> opCases(ncclDataType_t type) {
  std::vector<OpCase> cases = {
      {"sum", makeBuiltinOp(ncclSum, type, 1), false, false},
      {"prod", makeBuiltinOp(ncclProd, type, 1), false, false},
      {"max", makeBuiltinOp(ncclMax, type, 1), false, false},
      {"min", makeBuiltinOp(ncclMin, type, 1), false, false},
      {"avg/3 contribution+final", makeBuiltinOp(ncclAvg, type, 3), true, true},
      {"avg/3 partial", makeBuiltinOp(ncclAvg, type, 3), false, false},
      {"premulsum 0.3 contribution", preMulSum(type), true, false},
      {"premulsum 0.3 partial", preMulSum(type), false, false},
  };
  RedOp div;
  div.kind = RedKind::SumPostDiv;
  div.type = type;
  div.divisor = 7;
  cases.push_back({"sumpostdiv 7 final", div, false, true});
  cases.push_back({"sumpostdiv 7 not final", div, false, false});
  return cases;
}

class GpuReduce : public ::testing::TestWithParam<ncclDataType_t> {
 protected:
  void SetUp() override {
    const std::string reason = noGpuReason();
    if (reason.empty()) return;
    // run.sh sets this on the GPU machine, where a skip would hide a broken setup.
    const char* require = std::getenv("BRAID_REQUIRE_GPU");
    if (require != nullptr && *require != '\0' && std::string(require) != "0") {
      FAIL() << reason << " (BRAID_REQUIRE_GPU=" << require << ")";
    }
    GTEST_SKIP() << reason;
  }
};

// Runs one case on the device and on the host and compares every element.
// inPlace: dst is a's buffer, as when a received partial is reduced into.
void checkCase(const OpCase& c, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
               bool inPlace) {
  const ncclDataType_t type = c.op.type;
  const size_t size = typeSize(type);
  const size_t bytes = a.size();
  const size_t n = bytes / size;
  DeviceBuffer da = deviceAlloc(bytes), db = deviceAlloc(bytes), dd = deviceAlloc(bytes);
  ASSERT_TRUE(da && db && dd) << "cudaMalloc failed";
  ASSERT_EQ(cudaMemcpy(da.get(), a.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(db.get(), b.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(dd.get(), 0xa5, bytes), cudaSuccess);
  void* dst = inPlace ? da.get() : dd.get();

  const Result r = kernels::launchReduce(c.op, dst, da.get(), db.get(), n, c.pre, c.post, nullptr);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> got(bytes);
  ASSERT_EQ(cudaMemcpy(got.data(), dst, bytes, cudaMemcpyDeviceToHost), cudaSuccess);

  std::vector<uint8_t> want(bytes);
  hostReduce(c.op, want.data(), a.data(), b.data(), n, c.pre, c.post);

  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* g = &got[i * size];
    const uint8_t* w = &want[i * size];
    if (std::memcmp(g, w, size) == 0 || (isNaN(type, g) && isNaN(type, w))) continue;
    if (++bad <= 5) {
      uint64_t ga = 0, wa = 0, aa = 0, ba = 0;
      std::memcpy(&ga, g, size);
      std::memcpy(&wa, w, size);
      std::memcpy(&aa, &a[i * size], size);
      std::memcpy(&ba, &b[i * size], size);
      ADD_FAILURE() << typeName(type) << " " << c.name << (inPlace ? " in place" : "") << ": element "
                    << i << " a=0x" << std::hex << aa << " b=0x" << ba << " device=0x" << ga
                    << " host=0x" << wa << std::dec;
    }
  }
  EXPECT_EQ(bad, 0u) << typeName(type) << " " << c.name << ": " << bad << " of " << n << " differ";
}

TEST_P(GpuReduce, MatchesHostForEveryOp) {
  const ncclDataType_t type = GetParam();
  std::mt19937_64 rng(0x9e3779b97f4a7c15ull ^ uint64_t(type));
  const std::vector<uint8_t> a = randomData(type, kCount, rng);
  const std::vector<uint8_t> b = randomData(type, kCount, rng);
  for (const OpCase& c : opCases(type)) {
    SCOPED_TRACE(c.name);
    checkCase(c, a, b, false);
  }
}

TEST_P(GpuReduce, InPlaceMatchesHost) {
  const ncclDataType_t type = GetParam();
  std::mt19937_64 rng(0x51ed270b27a2f3c1ull ^ uint64_t(type));
  const std::vector<uint8_t> a = randomData(type, kCount, rng);
  const std::vector<uint8_t> b = randomData(type, kCount, rng);
  checkCase(opCases(type)[0], a, b, true);
  checkCase(opCases(type)[6], a, b, true);  // PreMulSum: the scaled operand is b
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GpuReduce, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<ncclDataType_t>& info) {
                           return std::string(typeName(info.param));
                         });

// Argument checks that return before touching a device: these run everywhere.
TEST(GpuReduceArgs, InvalidTypeIsRejected) {
  RedOp op;
  op.type = ncclNumTypes;
  int dummy = 0;
  const Result r = kernels::launchReduce(op, &dummy, &dummy, &dummy, 1, false, false, nullptr);
  EXPECT_EQ(r.code(), ncclInvalidArgument);
  EXPECT_NE(r.message().find("invalid datatype"), std::string::npos) << r.message();
}

TEST(GpuReduceArgs, ZeroCountIsANoOp) {
  RedOp op = makeBuiltinOp(ncclSum, ncclFloat32, 1);
  const Result r = kernels::launchReduce(op, nullptr, nullptr, nullptr, 0, false, false, nullptr);
  EXPECT_TRUE(r.ok()) << r.message();
}

}  // namespace
}  // namespace braid
