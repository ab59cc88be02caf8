// Tests of the perf tools' own logic: element codecs, exactness of the
// generated data, option parsing (the tools' and the peers') and launch
// environment detection.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/data_check.h"
#include "common/datatypes.h"
#include "common/launch_env.h"
#include "common/options.h"
#include "peers/peer_driver.h"

namespace braid::bench {
namespace {

uint32_t bitsOf(ncclDataType_t type, double v) {
  unsigned char buf[8] = {};
  encodeValue(type, v, buf);
  uint32_t bits = 0;
  std::memcpy(&bits, buf, typeInfo(type).size < 4 ? typeInfo(type).size : 4);
  return bits;
}

double roundTrip(ncclDataType_t type, double v) {
  unsigned char buf[8] = {};
  encodeValue(type, v, buf);
  return decodeValue(type, buf);
}

TEST(PerfCodec, KnownBitPatterns) {
  EXPECT_EQ(bitsOf(ncclFloat16, 1.0), 0x3C00u);
  EXPECT_EQ(bitsOf(ncclFloat16, -2.0), 0xC000u);
  EXPECT_EQ(bitsOf(ncclFloat16, 65504.0), 0x7BFFu);
  EXPECT_EQ(bitsOf(ncclFloat16, 0x1p-24), 0x0001u);  // smallest subnormal
  EXPECT_EQ(bitsOf(ncclBfloat16, 1.0), 0x3F80u);
  EXPECT_EQ(bitsOf(ncclBfloat16, -3.0), 0xC040u);
  EXPECT_EQ(bitsOf(ncclFloat8e4m3, 1.0), 0x38u);
  EXPECT_EQ(bitsOf(ncclFloat8e4m3, 448.0), 0x7Eu);
  EXPECT_EQ(bitsOf(ncclFloat8e4m3, 1000.0), 0x7Eu);  // saturates, no infinity
  EXPECT_EQ(bitsOf(ncclFloat8e4m3, 0x1p-9), 0x01u);
  EXPECT_EQ(bitsOf(ncclFloat8e5m2, 1.0), 0x3Cu);
  EXPECT_EQ(bitsOf(ncclFloat8e5m2, 57344.0), 0x7Bu);
  EXPECT_EQ(bitsOf(ncclFloat8e5m2, 1e6), 0x7Cu);  // infinity
}

TEST(PerfCodec, RoundsToNearestEven) {
  EXPECT_EQ(roundTrip(ncclFloat16, 2049.0), 2048.0);  // tie to even
  EXPECT_EQ(roundTrip(ncclFloat16, 2051.0), 2052.0);
  EXPECT_EQ(roundTrip(ncclFloat8e4m3, 17.0), 16.0);
  EXPECT_EQ(roundTrip(ncclFloat8e4m3, 19.0), 20.0);
  EXPECT_EQ(roundTrip(ncclFloat8e5m2, 9.0), 8.0);
  EXPECT_EQ(roundTrip(ncclFloat8e5m2, 11.0), 12.0);
  EXPECT_EQ(roundTrip(ncclBfloat16, 257.0), 256.0);
}

TEST(PerfCodec, EveryTypeHoldsItsExactIntegers) {
  for (const TypeInfo& t : allTypes()) {
    for (int64_t v = 0; v <= std::min<int64_t>(t.maxExactInt, 4096); ++v) {
      ASSERT_EQ(roundTrip(t.type, static_cast<double>(v)), static_cast<double>(v)) << t.name;
      if (t.isSigned) {
        ASSERT_EQ(roundTrip(t.type, -static_cast<double>(v)), -static_cast<double>(v)) << t.name;
      }
    }
    if (t.isFloat && t.size <= 2) {
      // For the narrow types the bound is tight: the next integer is not held.
      ASSERT_NE(roundTrip(t.type, static_cast<double>(t.maxExactInt + 1)), static_cast<double>(t.maxExactInt + 1))
          << t.name << " (maxExactInt could be larger)";
    }
  }
}

// Reduces in the element type itself, rounding after every step and in a
// rank order different from the checker's: the data must make that exact.
double reduceInType(const DataPattern& p, size_t index) {
  double acc = roundTrip(p.type->type, inputValue(p, p.nranks - 1, index));
  for (int r = p.nranks - 2; r >= 0; --r) {
    const double v = inputValue(p, r, index);
    double next = acc;
    switch (p.op) {
      case ncclProd: next = acc * v; break;
      case ncclMax: next = std::max(acc, v); break;
      case ncclMin: next = std::min(acc, v); break;
      default: next = acc + v; break;
    }
    acc = roundTrip(p.type->type, next);
  }
  return acc;
}

TEST(PerfData, ReductionsAreExactInEveryType) {
  for (const TypeInfo& t : allTypes()) {
    for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclMin}) {
      for (int n : {1, 2, 3, 5, 8, 17, 64}) {
        const DataPattern p{&t, op, true, n, 42};
        const size_t count = 257;
        std::vector<unsigned char> out(count * t.size);
        for (size_t i = 0; i < count; ++i) encodeValue(t.type, reduceInType(p, i), out.data() + i * t.size);
        const int64_t wrong =
            countWrong(p, out.data(), count, [](size_t i) { return Expect{Expect::kReduce, 0, i}; });
        ASSERT_EQ(wrong, 0) << t.name << " " << opName(op) << " n=" << n;
      }
    }
  }
}

TEST(PerfData, DataIsNotTrivial) {
  // A generator that produced all zeros would make every check pass.
  for (const TypeInfo& t : allTypes()) {
    for (ncclRedOp_t op : {ncclSum, ncclProd, ncclMax, ncclAvg}) {
      const DataPattern p{&t, op, true, 3, 7};
      int distinct = 0;
      double first = inputValue(p, 0, 0);
      for (size_t i = 1; i < 64; ++i) distinct += inputValue(p, 1, i) != first;
      EXPECT_GT(distinct, 8) << t.name << " " << opName(op);
    }
  }
}

TEST(PerfData, CheckerCountsWrongElements) {
  const TypeInfo& t = typeInfo(ncclFloat32);
  const DataPattern p{&t, ncclSum, false, 4, 9};
  std::vector<float> buf(100);
  fillInput(p, 2, buf.data(), buf.size());
  const auto self = [](size_t i) { return Expect{Expect::kCopy, 2, i}; };
  EXPECT_EQ(countWrong(p, buf.data(), buf.size(), self), 0);
  buf[3] += 1;
  buf[50] = std::nanf("");
  EXPECT_EQ(countWrong(p, buf.data(), buf.size(), self), 2);
  // Another rank's data is wrong almost everywhere.
  EXPECT_GT(countWrong(p, buf.data(), buf.size(), [](size_t i) { return Expect{Expect::kCopy, 1, i}; }), 80);
}

TEST(PerfData, AverageToleranceIsTightButSufficient) {
  const TypeInfo& t = typeInfo(ncclFloat16);
  const DataPattern p{&t, ncclAvg, true, 3, 5};
  std::vector<uint16_t> buf(64);
  for (size_t i = 0; i < buf.size(); ++i) {
    // NCCL's way: pre-multiply each input by 1/n in the type, then sum in the type.
    double acc = 0;
    for (int r = 0; r < 3; ++r)
      acc = roundTrip(t.type, acc + roundTrip(t.type, inputValue(p, r, i) * roundTrip(t.type, 1.0 / 3)));
    encodeValue(t.type, acc, &buf[i]);
  }
  const auto reduce = [](size_t i) { return Expect{Expect::kReduce, 0, i}; };
  EXPECT_EQ(countWrong(p, buf.data(), buf.size(), reduce), 0);
  for (auto& b : buf) b ^= 0x0200;  // far beyond the rounding error
  EXPECT_GT(countWrong(p, buf.data(), buf.size(), reduce), 50);
}

TEST(PerfData, IntegerAverageTruncates) {
  const TypeInfo& t = typeInfo(ncclInt32);
  const DataPattern p{&t, ncclAvg, true, 3, 11};
  std::vector<int32_t> buf(64);
  for (size_t i = 0; i < buf.size(); ++i) {
    int64_t sum = 0;
    for (int r = 0; r < 3; ++r) sum += static_cast<int64_t>(inputValue(p, r, i));
    buf[i] = static_cast<int32_t>(sum / 3);
  }
  EXPECT_EQ(countWrong(p, buf.data(), buf.size(), [](size_t i) { return Expect{Expect::kReduce, 0, i}; }), 0);
}

TEST(PerfGuard, DetectsWrites) {
  std::vector<unsigned char> g(64);
  fillGuard(g.data(), g.size());
  EXPECT_EQ(countGuardDamage(g.data(), g.size()), 0);
  g[10] = 0;
  EXPECT_EQ(countGuardDamage(g.data(), g.size()), 1);
}

// ---- options -------------------------------------------------------------------

// Runs `parser` on the argv {"tool", args...}.
template <typename O>
ParseStatus parseArgs(ParseStatus (*parser)(int, char**, O*, std::string*), std::vector<std::string> args, O* o,
                      std::string* err) {
  args.insert(args.begin(), "tool");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return parser(static_cast<int>(args.size()), argv.data(), o, err);
}

ParseStatus parse(std::vector<std::string> args, Options* o, std::string* err) {
  return parseArgs(parseOptions, std::move(args), o, err);
}

ParseStatus parse(std::vector<std::string> args, peers::Options* o, std::string* err) {
  return parseArgs(peers::parseOptions, std::move(args), o, err);
}

TEST(PerfOptions, NcclTestsFlags) {
  Options o;
  std::string err;
  ASSERT_EQ(parse({"-b", "8", "-e", "128M", "-f", "2", "-n", "7", "-w", "1", "-c", "0", "-o", "all", "-d",
                   "bfloat16", "-r", "1", "-z", "1", "-a", "3", "-m", "2", "-N", "2", "--memory", "host"},
                  &o, &err),
            ParseStatus::kOk)
      << err;
  EXPECT_EQ(o.minBytes, 8u);
  EXPECT_EQ(o.maxBytes, 128u << 20);
  EXPECT_EQ(o.stepFactor, 2u);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.warmupIters, 1);
  EXPECT_EQ(o.check, 0);
  EXPECT_EQ(o.ops.size(), 5u);
  ASSERT_EQ(o.types.size(), 1u);
  EXPECT_EQ(o.types[0].type, ncclBfloat16);
  EXPECT_EQ(o.root, 1);
  EXPECT_EQ(o.blocking, 1);
  EXPECT_EQ(o.average, 3);
  EXPECT_EQ(o.aggIters, 2);
  EXPECT_EQ(o.runCycles, 2);
  EXPECT_EQ(o.memory, MemoryKind::kHost);
}

TEST(PerfOptions, Defaults) {
  Options o;
  std::string err;
  ASSERT_EQ(parse({}, &o, &err), ParseStatus::kOk);
  EXPECT_EQ(o.minBytes, 32u << 20);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmupIters, 5);
  EXPECT_EQ(o.check, 1);
  EXPECT_EQ(o.average, 1);
  EXPECT_EQ(o.types[0].type, ncclFloat32);
  EXPECT_EQ(o.ops[0].op, ncclSum);
  EXPECT_EQ(o.memory, MemoryKind::kAuto);
}

TEST(PerfOptions, RejectsBadInput) {
  Options o;
  std::string err;
  EXPECT_EQ(parse({"-b", "1M", "-e", "1K"}, &o, &err), ParseStatus::kError);
  EXPECT_NE(err.find("minbytes"), std::string::npos);
  EXPECT_EQ(parse({"-d", "float128"}, &o, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"-o", "xor"}, &o, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"--memory", "gpu"}, &o, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"-b"}, &o, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"-q"}, &o, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"-b", "8", "-e", "64", "-i", "0"}, &o, &err), ParseStatus::kError);
  EXPECT_EQ(parse({"-h"}, &o, &err), ParseStatus::kHelp);
}

TEST(PerfOptions, LongFlags) {
  Options o;
  std::string err;
  ASSERT_EQ(parse({"--minbytes", "1K", "--maxbytes", "1M", "--stepbytes", "4K", "--stepfactor", "4", "--iters", "3",
                   "--warmup_iters", "2", "--check", "2", "--agg_iters", "3", "--op", "max", "--datatype", "int8",
                   "--root", "all", "--average", "2", "--blocking", "1", "--run_cycles", "0", "--nthreads", "1",
                   "--ngpus", "1", "--cudagraph", "4"},
                  &o, &err),
            ParseStatus::kOk)
      << err;
  EXPECT_EQ(o.minBytes, 1024u);
  EXPECT_EQ(o.maxBytes, 1u << 20);
  EXPECT_EQ(o.stepBytes, 4096u);
  EXPECT_EQ(o.stepFactor, 4u);
  EXPECT_EQ(o.iters, 3);
  EXPECT_EQ(o.warmupIters, 2);
  EXPECT_EQ(o.check, 2);
  EXPECT_EQ(o.aggIters, 3);
  ASSERT_EQ(o.ops.size(), 1u);
  EXPECT_EQ(o.ops[0].op, ncclMax);
  ASSERT_EQ(o.types.size(), 1u);
  EXPECT_EQ(o.types[0].type, ncclInt8);
  EXPECT_EQ(o.root, -1);
  EXPECT_EQ(o.average, 2);
  EXPECT_EQ(o.blocking, 1);
  EXPECT_EQ(o.runCycles, 0);
  EXPECT_EQ(o.graphLaunches, 4);
}

TEST(PerfOptions, BadValuesSayWhy) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"-n", "x"}, "invalid value 'x' for -n (expected an integer in [0, 1073741824])"},
      {{"--average", "4"}, "invalid value '4' for -a (expected an integer in [0, 3])"},
      {{"-t", "0"}, "invalid value '0' for -t (expected an integer in [1, 1024])"},
      {{"-r", "x"}, "invalid value 'x' for -r (expected an integer in [0, 16777216])"},
      {{"-C", "x"}, "invalid value 'x' for -C (expected an integer in [0, 1073741824])"},
      {{"-b", "12Q"}, "invalid size '12Q' for -b (e.g. 8, 64K, 1M, 0.5G)"},
      {{"-o", "xor"}, "unknown operator 'xor' for -o (sum, prod, min, max, avg, all)"},
      {{"-d", "float128"},
       "unknown datatype 'float128' for -d (int8, uint8, int32, uint32, int64, uint64, half, float, double, "
       "bfloat16, fp8e4m3, fp8e5m2, all)"},
      {{"--memory", "gpu"}, "invalid value 'gpu' for --memory (host, device or auto)"},
      {{"-b"}, "option -b needs a value"},
      {{"-q"}, "unknown option '-q'"},
      {{"8"}, "unexpected argument '8'"},
      {{"-b", "1M", "-e", "1K"}, "minbytes (-b 1048576) is larger than maxbytes (-e 1024)"},
      {{"-b", "8", "-e", "64", "-i", "0"}, "the size sweep never advances: give -f > 1 or -i > 0"},
  };
  for (const auto& [args, message] : cases) {
    Options o;
    std::string err;
    EXPECT_EQ(parse(args, &o, &err), ParseStatus::kError) << args[0];
    EXPECT_EQ(err, message);
  }
}

TEST(PerfOptions, IgnoredFlagsAreReportedOnlyWhenSet) {
  Options o;
  std::string err;
  ASSERT_EQ(parse({"-p", "1", "-y", "0", "--timeout", "5", "-C", "0"}, &o, &err), ParseStatus::kOk) << err;
  EXPECT_EQ(o.ignored, (std::vector<std::string>{"-p 1", "-T 5"}));
}

TEST(PerfOptions, Roots) {
  Options o;
  std::string err;
  for (const char* every : {"all", "-1"}) {
    ASSERT_EQ(parse({"-r", every}, &o, &err), ParseStatus::kOk) << err;
    EXPECT_EQ(o.root, -1);
  }
  ASSERT_EQ(parse({"-r", "2"}, &o, &err), ParseStatus::kOk) << err;
  EXPECT_EQ(o.root, 2);
}

TEST(PerfOptions, HelpListsEveryFlag) {
  const std::string help = usage("tool");
  EXPECT_EQ(help.rfind("Usage: tool [options]\n", 0), 0u);
  for (const char* flag :
       {"-b,--minbytes <size>", "-e,--maxbytes <size>", "-i,--stepbytes <size>", "-f,--stepfactor <n>",
        "-n,--iters <n>", "-w,--warmup_iters <n>", "-m,--agg_iters <n>", "-c,--check <n>", "-o,--op <op>",
        "-d,--datatype <type>", "-r,--root <rank|all>", "-a,--average <0-3>", "-z,--blocking <0/1>",
        "-N,--run_cycles <n>", "-t,--nthreads <n>", "-g,--ngpus <n>", "-G,--cudagraph <n>",
        "-p,--parallel_init <n>", "-y,--stream_null <n>", "-T,--timeout <n>", "-C,--report_cputime <n>",
        "--memory host|device|auto", "-h,--help"})
    EXPECT_NE(help.find("\n  " + std::string(flag)), std::string::npos) << flag;
  // A help text of several lines continues in its own column.
  EXPECT_NE(help.find("  -d,--datatype <type>      int8 uint8 int32 uint32 int64 uint64 half float double\n"
                      "                            bfloat16 fp8e4m3 fp8e5m2, or all (default float)\n"),
            std::string::npos)
      << help;
}

// The peers take all_reduce_perf's sweep flags through the same table.
TEST(PeerOptions, SweepFlagsAndFloatSumOnly) {
  peers::Options o;
  std::string err;
  ASSERT_EQ(parse({}, &o, &err), ParseStatus::kOk) << err;
  EXPECT_EQ(o.minBytes, 32u << 20);
  EXPECT_EQ(o.iters, 20);
  ASSERT_EQ(parse({"-b", "8", "--maxbytes", "64M", "-f", "2", "-n", "3", "-w", "1", "-c", "0", "-d", "float32", "-o",
                   "sum"},
                  &o, &err),
            ParseStatus::kOk)
      << err;
  EXPECT_EQ(o.minBytes, 8u);
  EXPECT_EQ(o.maxBytes, 64u << 20);
  EXPECT_EQ(o.stepFactor, 2u);
  EXPECT_EQ(o.iters, 3);
  EXPECT_EQ(o.warmupIters, 1);
  EXPECT_EQ(o.check, 0);
  EXPECT_EQ(parse({"-d", "float"}, &o, &err), ParseStatus::kOk) << err;
  EXPECT_EQ(parse({"-h"}, &o, &err), ParseStatus::kHelp);

  const std::pair<std::vector<std::string>, std::string> refused[] = {
      {{"-d", "half"}, "-d half: the peer programs time float32 only"},
      {{"--op", "max"}, "-o max: the peer programs time sum only"},
      {{"-m", "2"}, "unknown option '-m'"},  // all_reduce_perf's, but meaningless here
      {{"-n", "x"}, "invalid value 'x' for -n (expected an integer in [0, 1073741824])"},
      {{"-b", "1M", "-e", "1K"}, "minbytes (-b 1048576) is larger than maxbytes (-e 1024)"},
  };
  for (const auto& [args, message] : refused) {
    EXPECT_EQ(parse(args, &o, &err), ParseStatus::kError) << args[0];
    EXPECT_EQ(err, message);
  }
}

TEST(PerfOptions, Sizes) {
  size_t s = 0;
  EXPECT_TRUE(parseSize("1K", &s));
  EXPECT_EQ(s, 1024u);
  EXPECT_TRUE(parseSize("0.5M", &s));
  EXPECT_EQ(s, 512u * 1024);
  EXPECT_TRUE(parseSize("2G", &s));
  EXPECT_EQ(s, 2ull << 30);
  EXPECT_FALSE(parseSize("12Q", &s));
  EXPECT_FALSE(parseSize("", &s));
}

// ---- launch environment ------------------------------------------------------------

class LaunchEnvTest : public ::testing::Test {
 protected:
  void SetUp() override { clear(); }
  void TearDown() override { clear(); }
  static void clear() {
    for (const char* v : {"BRAID_RANK", "BRAID_WORLD_SIZE", "BRAID_LOCAL_RANK", "BRAID_LOCAL_SIZE",
                          "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                          "OMPI_COMM_WORLD_LOCAL_SIZE", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
                          "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                          "LOCAL_WORLD_SIZE", "NCCL_COMM_ID", "MASTER_ADDR", "MASTER_PORT"})
      unsetenv(v);
  }
};

TEST_F(LaunchEnvTest, NoLauncherMeansOneRank) {
  LaunchEnv e;
  std::string err;
  ASSERT_TRUE(detectLaunchEnv(&e, &err));
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.size, 1);
  std::string note;
  EXPECT_TRUE(ensureCommId(e, &note, &err));
}

TEST_F(LaunchEnvTest, BraidWinsOverOthers) {
  setenv("OMPI_COMM_WORLD_RANK", "3", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("BRAID_RANK", "1", 1);
  setenv("BRAID_WORLD_SIZE", "2", 1);
  LaunchEnv e;
  std::string err;
  ASSERT_TRUE(detectLaunchEnv(&e, &err));
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.size, 2);
  EXPECT_EQ(e.source, "BRAID_RANK/BRAID_WORLD_SIZE");
}

TEST_F(LaunchEnvTest, EachLauncher) {
  const char* pairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                            {"PMI_RANK", "PMI_SIZE"},
                            {"SLURM_PROCID", "SLURM_NTASKS"},
                            {"RANK", "WORLD_SIZE"}};
  for (auto& p : pairs) {
    clear();
    setenv(p[0], "2", 1);
    setenv(p[1], "5", 1);
    LaunchEnv e;
    std::string err;
    ASSERT_TRUE(detectLaunchEnv(&e, &err)) << err;
    EXPECT_EQ(e.rank, 2) << p[0];
    EXPECT_EQ(e.size, 5) << p[1];
  }
}

TEST_F(LaunchEnvTest, RejectsNonsense) {
  setenv("RANK", "5", 1);
  setenv("WORLD_SIZE", "5", 1);
  LaunchEnv e;
  std::string err;
  EXPECT_FALSE(detectLaunchEnv(&e, &err));
  setenv("RANK", "x", 1);
  EXPECT_FALSE(detectLaunchEnv(&e, &err));
  EXPECT_NE(err.find("RANK"), std::string::npos);
}

TEST_F(LaunchEnvTest, CommIdFromTorchrunVariables) {
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "2", 1);
  setenv("MASTER_ADDR", "10.1.2.3", 1);
  setenv("MASTER_PORT", "29500", 1);
  LaunchEnv e;
  std::string err, note;
  ASSERT_TRUE(detectLaunchEnv(&e, &err));
  ASSERT_TRUE(ensureCommId(e, &note, &err)) << err;
  EXPECT_STREQ(std::getenv("NCCL_COMM_ID"), "10.1.2.3:29501");
}

TEST_F(LaunchEnvTest, MultiRankWithoutRendezvousFails) {
  setenv("PMI_RANK", "0", 1);
  setenv("PMI_SIZE", "2", 1);
  LaunchEnv e;
  std::string err, note;
  ASSERT_TRUE(detectLaunchEnv(&e, &err));
  EXPECT_FALSE(ensureCommId(e, &note, &err));
  EXPECT_NE(err.find("NCCL_COMM_ID"), std::string::npos);
}

}  // namespace
}  // namespace braid::bench
