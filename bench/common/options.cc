#include "common/options.h"

#include <getopt.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace braid::bench {
namespace {

constexpr int kOptMemory = 1000;

bool parseInt(const char* flag, const char* text, long lo, long hi, int* out, std::string* error) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
    *error = std::string("invalid value '") + text + "' for " + flag + " (expected an integer in [" +
             std::to_string(lo) + ", " + std::to_string(hi) + "])";
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

bool parseSizeFlag(const char* flag, const char* text, size_t* out, std::string* error) {
  if (parseSize(text, out)) return true;
  *error = std::string("invalid size '") + text + "' for " + flag + " (e.g. 8, 64K, 1M, 0.5G)";
  return false;
}

}  // namespace

bool parseSize(const std::string& text, size_t* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || end == text.c_str() || !(v >= 0) || !std::isfinite(v)) return false;
  double unit = 1;
  switch (*end) {
    case '\0': break;
    case 'k': case 'K': unit = 1024.0; ++end; break;
    case 'm': case 'M': unit = 1024.0 * 1024; ++end; break;
    case 'g': case 'G': unit = 1024.0 * 1024 * 1024; ++end; break;
    default: return false;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0') return false;
  const double bytes = v * unit;
  if (bytes > 1e18) return false;
  *out = static_cast<size_t>(bytes);
  return true;
}

ParseStatus parseOptions(int argc, char** argv, Options* out, std::string* error) {
  Options o;
  parseTypeName("float", &o.types);
  parseOpName("sum", &o.ops);
  static const struct option longOpts[] = {
      {"nthreads", required_argument, nullptr, 't'},
      {"ngpus", required_argument, nullptr, 'g'},
      {"minbytes", required_argument, nullptr, 'b'},
      {"maxbytes", required_argument, nullptr, 'e'},
      {"stepbytes", required_argument, nullptr, 'i'},
      {"stepfactor", required_argument, nullptr, 'f'},
      {"iters", required_argument, nullptr, 'n'},
      {"agg_iters", required_argument, nullptr, 'm'},
      {"warmup_iters", required_argument, nullptr, 'w'},
      {"parallel_init", required_argument, nullptr, 'p'},
      {"check", required_argument, nullptr, 'c'},
      {"op", required_argument, nullptr, 'o'},
      {"datatype", required_argument, nullptr, 'd'},
      {"root", required_argument, nullptr, 'r'},
      {"blocking", required_argument, nullptr, 'z'},
      {"stream_null", required_argument, nullptr, 'y'},
      {"timeout", required_argument, nullptr, 'T'},
      {"cudagraph", required_argument, nullptr, 'G'},
      {"report_cputime", required_argument, nullptr, 'C'},
      {"average", required_argument, nullptr, 'a'},
      {"run_cycles", required_argument, nullptr, 'N'},
      {"memory", required_argument, nullptr, kOptMemory},
      {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0},
  };
  optind = 0;  // 0, not 1: glibc then also forgets state left by an earlier parse
  opterr = 0;
  int dummy = 0;
  for (;;) {
    const int c = getopt_long(argc, argv, ":t:g:b:e:i:f:n:m:w:p:c:o:d:r:z:y:T:G:C:a:N:h", longOpts,
                              nullptr);
    if (c == -1) break;
    bool ok = true;
    switch (c) {
      case 't': ok = parseInt("-t", optarg, 1, 1024, &o.nThreads, error); break;
      case 'g': ok = parseInt("-g", optarg, 1, 1024, &o.nGpus, error); break;
      case 'b': ok = parseSizeFlag("-b", optarg, &o.minBytes, error); break;
      case 'e': ok = parseSizeFlag("-e", optarg, &o.maxBytes, error); break;
      case 'i': ok = parseSizeFlag("-i", optarg, &o.stepBytes, error); break;
      case 'f': {
        int f = 1;
        ok = parseInt("-f", optarg, 0, 1 << 20, &f, error);
        o.stepFactor = static_cast<size_t>(f);
        break;
      }
      case 'n': ok = parseInt("-n", optarg, 0, 1 << 30, &o.iters, error); break;
      case 'm': ok = parseInt("-m", optarg, 1, 1 << 20, &o.aggIters, error); break;
      case 'w': ok = parseInt("-w", optarg, 0, 1 << 30, &o.warmupIters, error); break;
      case 'c': ok = parseInt("-c", optarg, 0, 1 << 20, &o.check, error); break;
      case 'a': ok = parseInt("-a", optarg, 0, 3, &o.average, error); break;
      case 'z': ok = parseInt("-z", optarg, 0, 1, &o.blocking, error); break;
      case 'N': ok = parseInt("-N", optarg, 0, 1 << 30, &o.runCycles, error); break;
      case 'o':
        ok = parseOpName(optarg, &o.ops);
        if (!ok) *error = std::string("unknown operator '") + optarg + "' for -o (sum, prod, min, max, avg, all)";
        break;
      case 'd':
        ok = parseTypeName(optarg, &o.types);
        if (!ok)
          *error = std::string("unknown datatype '") + optarg +
                   "' for -d (int8, uint8, int32, uint32, int64, uint64, half, float, double, "
                   "bfloat16, fp8e4m3, fp8e5m2, all)";
        break;
      case 'r':
        if (std::strcmp(optarg, "all") == 0 || std::strcmp(optarg, "-1") == 0) {
          o.root = -1;
        } else {
          ok = parseInt("-r", optarg, 0, 1 << 24, &o.root, error);
        }
        break;
      case 'G':
        ok = parseInt("-G", optarg, 0, 1 << 20, &o.graphLaunches, error);
        break;
      case 'p': case 'y': case 'T': case 'C':
        ok = parseInt((std::string("-") + static_cast<char>(c)).c_str(), optarg, 0, 1 << 30, &dummy, error);
        if (ok && dummy != 0) o.ignored.push_back(std::string("-") + static_cast<char>(c) + " " + optarg);
        break;
      case kOptMemory:
        if (std::strcmp(optarg, "host") == 0) {
          o.memory = MemoryKind::kHost;
        } else if (std::strcmp(optarg, "device") == 0) {
          o.memory = MemoryKind::kDevice;
        } else if (std::strcmp(optarg, "auto") == 0) {
          o.memory = MemoryKind::kAuto;
        } else {
          ok = false;
          *error = std::string("invalid value '") + optarg + "' for --memory (host, device or auto)";
        }
        break;
      case 'h': return ParseStatus::kHelp;
      case ':':
        *error = std::string("option ") + argv[optind - 1] + " needs a value";
        return ParseStatus::kError;
      default:
        *error = std::string("unknown option '") + argv[optind - 1] + "'";
        return ParseStatus::kError;
    }
    if (!ok) return ParseStatus::kError;
  }
  if (optind < argc) {
    *error = std::string("unexpected argument '") + argv[optind] + "'";
    return ParseStatus::kError;
  }
  if (o.minBytes > o.maxBytes) {
    *error = "minbytes (-b " + std::to_string(o.minBytes) + ") is larger than maxbytes (-e " +
             std::to_string(o.maxBytes) + ")";
    return ParseStatus::kError;
  }
  if (o.stepFactor <= 1 && o.stepBytes == 0 && o.minBytes != o.maxBytes) {
    *error = "the size sweep never advances: give -f > 1 or -i > 0";
    return ParseStatus::kError;
  }
  *out = std::move(o);
  return ParseStatus::kOk;
}

void printUsage(const char* prog) {
  std::printf(
      "Usage: %s [options]\n"
      "  -b,--minbytes <size>      smallest size (default 32M; K/M/G suffixes)\n"
      "  -e,--maxbytes <size>      largest size (default 32M)\n"
      "  -i,--stepbytes <size>     add this between sizes (default 1M)\n"
      "  -f,--stepfactor <n>       multiply by this between sizes (overrides -i when > 1)\n"
      "  -n,--iters <n>            timed iterations per size (default 20)\n"
      "  -w,--warmup_iters <n>     untimed iterations before the sweep (default 5)\n"
      "  -m,--agg_iters <n>        operations grouped into one iteration (default 1)\n"
      "  -c,--check <n>            check the results n times per size (default 1; 0 = off)\n"
      "  -o,--op <op>              sum, prod, min, max, avg or all (default sum)\n"
      "  -d,--datatype <type>      int8 uint8 int32 uint32 int64 uint64 half float double\n"
      "                            bfloat16 fp8e4m3 fp8e5m2, or all (default float)\n"
      "  -r,--root <rank|all>      root of rooted collectives (default 0)\n"
      "  -a,--average <0-3>        time reported across ranks: 0 rank 0, 1 average,\n"
      "                            2 minimum, 3 maximum (default 1)\n"
      "  -z,--blocking <0/1>       barrier after every operation (default 0)\n"
      "  -N,--run_cycles <n>       run the whole sweep n times (0 = until killed; default 1)\n"
      "  -t,--nthreads <n>, -g,--ngpus <n>   ranks per process: only 1 is supported\n"
      "  -G,--cudagraph <n>        device memory: capture the timed iterations in a CUDA\n"
      "                            graph and launch it n times (0: no graph; default 0)\n"
      "  -p -y -T -C               accepted for nccl-tests compatibility; no effect here\n"
      "  --memory host|device|auto buffer memory (default auto: the rank's GPU when one is\n"
      "                            present and the library moves device memory, else host)\n"
      "  -h,--help\n"
      "Ranks come from the launcher (braidrun, mpirun, srun, torchrun); see bench/README.md.\n",
      prog);
}

}  // namespace braid::bench
