#include "peers/peer_driver.h"

#include <getopt.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "common/table_format.h"

namespace braid::peers {
namespace {

using braid::bench::formatResultColumns;

bool parseSize(const char* text, size_t* out) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (errno != 0 || end == text || !(v >= 0) || !std::isfinite(v)) return false;
  double unit = 1;
  switch (*end) {
    case '\0': break;
    case 'k': case 'K': unit = 1024.0; ++end; break;
    case 'm': case 'M': unit = 1024.0 * 1024; ++end; break;
    case 'g': case 'G': unit = 1024.0 * 1024 * 1024; ++end; break;
    default: return false;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0' || v * unit > 1e18) return false;
  *out = static_cast<size_t>(v * unit);
  return true;
}

bool parseInt(const char* text, long lo, long hi, long* out) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

// Applies one flag; false with *error when its value is not acceptable.
bool applyFlag(int flag, const char* value, Options* o, std::string* error) {
  long n = 0;
  switch (flag) {
    case 'b': if (parseSize(value, &o->minBytes)) return true; break;
    case 'e': if (parseSize(value, &o->maxBytes)) return true; break;
    case 'i': if (parseSize(value, &o->stepBytes)) return true; break;
    case 'f': if (parseInt(value, 1, 1 << 20, &n)) { o->stepFactor = static_cast<size_t>(n); return true; } break;
    case 'n': if (parseInt(value, 0, 1 << 30, &n)) { o->iters = static_cast<int>(n); return true; } break;
    case 'w': if (parseInt(value, 0, 1 << 30, &n)) { o->warmupIters = static_cast<int>(n); return true; } break;
    case 'c': if (parseInt(value, 0, 1 << 20, &n)) { o->check = static_cast<int>(n); return true; } break;
    case 'd':
      if (std::strcmp(value, "float") == 0 || std::strcmp(value, "float32") == 0) return true;
      *error = std::string("-d ") + value + ": the peer programs time float32 only";
      return false;
    case 'o':
      if (std::strcmp(value, "sum") == 0) return true;
      *error = std::string("-o ") + value + ": the peer programs time sum only";
      return false;
    default: break;
  }
  *error = std::string("invalid value '") + value + "' for -" + static_cast<char>(flag);
  return false;
}

struct FreeDeleter {
  void operator()(float* p) const { std::free(p); }
};
using HostBuffer = std::unique_ptr<float[], FreeDeleter>;

HostBuffer allocHost(size_t count) {
  constexpr size_t kAlign = 4096;
  const size_t bytes = (count * sizeof(float) + kAlign - 1) / kAlign * kAlign + kAlign;
  auto* p = static_cast<float*>(std::aligned_alloc(kAlign, bytes));
  if (p) std::memset(p, 0, bytes);  // fault the pages in before timing
  return HostBuffer(p);
}

// Small integers: every partial sum is exact in float32, on any rank count
// the tools are run with.
float inputValue(int rank, size_t i, unsigned seed) {
  return static_cast<float>((i * 7 + static_cast<size_t>(rank) * 3 + seed) % 16 + 1);
}


struct Measurement {
  double usec = 0;
  double algbw = 0;
  double busbw = 0;
  long long wrong = -1;  // -1: not checked
};

class Sweep {
 public:
  Sweep(Backend& b, const Options& o, const char* tool) : b_(b), o_(o), tool_(tool) {}

  int run() {
    const size_t maxCount = o_.maxBytes / sizeof(float);
    send_ = allocHost(maxCount);
    recv_ = allocHost(maxCount);
    if (!send_ || !recv_) {
      std::fprintf(stderr, "%s: cannot allocate 2 x %zu bytes: lower -e\n", tool_, o_.maxBytes);
      return 1;
    }
    fill(send_.get(), maxCount, 0);
    fill(recv_.get(), maxCount, 0);
    printHeader();
    b_.barrier();
    warmup(maxCount);
    warmup(o_.minBytes / sizeof(float));
    for (size_t bytes : sizes()) printRow(bytes, measure(bytes, false), measure(bytes, true));
    if (b_.rank() == 0) {
      std::printf("# Out of bounds values : %lld %s\n", wrongTotal_, wrongTotal_ ? "FAILED" : "OK");
      std::printf("# Avg bus bandwidth    : %g \n", rows_ ? busbwSum_ / rows_ : 0.0);
      std::printf("#\n");
    }
    return wrongTotal_ ? 1 : 0;
  }

 private:
  std::vector<size_t> sizes() const {
    std::vector<size_t> out;
    for (size_t s = o_.minBytes; s <= o_.maxBytes;) {
      out.push_back(s);
      const size_t next = o_.stepFactor > 1 ? s * o_.stepFactor : s + o_.stepBytes;
      if (next <= s) break;  // zero start with a factor, or overflow
      s = next;
    }
    return out;
  }

  void fill(float* p, size_t count, unsigned seed) const {
    for (size_t i = 0; i < count; ++i) p[i] = inputValue(b_.rank(), i, seed);
  }

  void warmup(size_t count) {
    for (int i = 0; i < o_.warmupIters; ++i) b_.allreduceFloatSum(send_.get(), recv_.get(), count);
  }

  // Mirrors all_reduce_perf: one untimed call, a barrier, -n timed calls;
  // the time of one call is averaged over the ranks.
  Measurement measure(size_t bytes, bool inPlace) {
    const size_t count = bytes / sizeof(float);
    const float* src = inPlace ? recv_.get() : send_.get();
    b_.allreduceFloatSum(src, recv_.get(), count);
    b_.barrier();
    const auto start = std::chrono::steady_clock::now();
    for (int it = 0; it < o_.iters; ++it) b_.allreduceFloatSum(src, recv_.get(), count);
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double local = o_.iters > 0 ? elapsed / o_.iters : 0.0;
    const double seconds = b_.sumAcrossRanks(local) / b_.size();

    Measurement m;
    m.usec = seconds * 1e6;
    if (seconds > 0) {
      m.algbw = static_cast<double>(count * sizeof(float)) / 1e9 / seconds;
      m.busbw = m.algbw * 2.0 * (b_.size() - 1) / b_.size();
    }
    if (o_.check > 0) {
      m.wrong = 0;
      for (int i = 0; i < o_.check && m.wrong == 0; ++i)
        m.wrong = static_cast<long long>(b_.sumAcrossRanks(static_cast<double>(checkOnce(count, inPlace))));
      if (m.wrong > 0) wrongTotal_ += m.wrong;
    }
    busbwSum_ += m.busbw;
    ++rows_;
    return m;
  }

  // Fresh inputs, one call, then every output element against the exact sum;
  // out of place the send buffer must come back untouched.
  long long checkOnce(size_t count, bool inPlace) {
    const unsigned seed = ++seed_;
    float* send = inPlace ? recv_.get() : send_.get();
    if (!inPlace) std::fill(recv_.get(), recv_.get() + count, -1.0f);
    fill(send, count, seed);
    b_.allreduceFloatSum(send, recv_.get(), count);
    long long wrong = 0;
    for (size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int r = 0; r < b_.size(); ++r) want += inputValue(r, i, seed);
      if (recv_[i] != want) ++wrong;
      if (!inPlace && send[i] != inputValue(b_.rank(), i, seed)) ++wrong;
    }
    return wrong;
  }

  void printHeader() const {
    if (b_.rank() != 0) return;
    std::printf("# %s: AllReduce\n", tool_);
    std::printf("# minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: %d validation: %d\n",
                o_.minBytes, o_.maxBytes, o_.stepFactor > 1 ? o_.stepFactor : o_.stepBytes,
                o_.stepFactor > 1 ? "factor" : "bytes", o_.warmupIters, o_.iters, o_.check);
    std::printf("#\n# Library: %s\n# Ranks: %d\n# Memory: host\n#\n", b_.describe().c_str(), b_.size());
    std::printf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place\n", "", "",
                "", "", "");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type",
                "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "",
                "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);
  }

  static std::string side(const Measurement& m) {
    return formatResultColumns(m.usec, m.algbw, m.busbw, static_cast<long long>(m.wrong));
  }


  void printRow(size_t bytes, const Measurement& out, const Measurement& in) const {
    if (b_.rank() != 0) return;
    const size_t count = bytes / sizeof(float);
    std::printf("%12zu  %12zu  %8s  %6s  %6d%s%s\n", count * sizeof(float), count, "float", "sum", -1,
                side(out).c_str(), side(in).c_str());
    std::fflush(stdout);
  }

  Backend& b_;
  const Options& o_;
  const char* tool_;
  HostBuffer send_;
  HostBuffer recv_;
  unsigned seed_ = 0;
  long long wrongTotal_ = 0;  // identical on every rank: summed across ranks
  double busbwSum_ = 0;
  int rows_ = 0;
};

}  // namespace

ParseStatus parseOptions(int argc, char** argv, Options* out, std::string* error) {
  Options o;
  static const struct option longOpts[] = {
      {"minbytes", required_argument, nullptr, 'b'},   {"maxbytes", required_argument, nullptr, 'e'},
      {"stepbytes", required_argument, nullptr, 'i'},  {"stepfactor", required_argument, nullptr, 'f'},
      {"iters", required_argument, nullptr, 'n'},      {"warmup_iters", required_argument, nullptr, 'w'},
      {"check", required_argument, nullptr, 'c'},      {"datatype", required_argument, nullptr, 'd'},
      {"op", required_argument, nullptr, 'o'},         {"help", no_argument, nullptr, 'h'},
      {nullptr, 0, nullptr, 0}};
  optind = 1;
  opterr = 0;
  int c;
  while ((c = getopt_long(argc, argv, ":b:e:i:f:n:w:c:d:o:h", longOpts, nullptr)) != -1) {
    if (c == 'h') return ParseStatus::kHelp;
    if (c == '?' || c == ':') {
      *error = std::string(c == ':' ? "missing value for " : "unknown flag ") + argv[optind - 1];
      return ParseStatus::kError;
    }
    if (!applyFlag(c, optarg, &o, error)) return ParseStatus::kError;
  }
  if (optind < argc) {
    *error = std::string("unexpected argument '") + argv[optind] + "'";
    return ParseStatus::kError;
  }
  if (o.minBytes > o.maxBytes) {
    *error = "-b is larger than -e";
    return ParseStatus::kError;
  }
  *out = o;
  return ParseStatus::kOk;
}

void printUsage(const char* tool) {
  std::printf(
      "Usage: %s [-b min] [-e max] [-f factor | -i step] [-n iters] [-w warmup] [-c checks]\n"
      "Float32 sum allreduce sweep with all_reduce_perf's columns (sizes take K/M/G).\n"
      "  -b/-e  smallest/largest size in bytes (default 32M/32M)\n"
      "  -f/-i  step factor / step in bytes (default: +1M)\n"
      "  -n/-w  timed / warm-up iterations (default 20/5)\n"
      "  -c     check the result this many times per size, 0 = off (default 1)\n"
      "  -d float, -o sum are accepted for compatibility\n",
      tool);
}

int runSweep(Backend& backend, const Options& opts, const char* tool) {
  return Sweep(backend, opts, tool).run();
}

}  // namespace braid::peers
