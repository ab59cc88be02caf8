#include "peers/peer_driver.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "common/table_format.h"

namespace braid::peers {
namespace {

using braid::bench::Flag;
using braid::bench::formatResultColumns;

// all_reduce_perf's -d and -o, where the peers time one value: `value`, also
// accepted as `fullName`, the name errors use.
Flag onlyValue(char shortName, const char* longName, const char* value, const char* fullName) {
  return {shortName, longName, value, "accepted for compatibility; no other value is",
          [=](const char* text, std::string* error) {
            if (std::strcmp(text, value) == 0 || std::strcmp(text, fullName) == 0) return true;
            *error = std::string("-") + shortName + " " + text + ": the peer programs time " + fullName + " only";
            return false;
          }};
}

std::vector<Flag> peerFlags(Options* o) {
  std::vector<Flag> flags = bench::sweepFlags(o);
  flags.push_back(onlyValue('d', "datatype", "float", "float32"));
  flags.push_back(onlyValue('o', "op", "sum", "sum"));
  return flags;
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
  const ParseStatus status = bench::parseCommandLine(argc, argv, peerFlags(&o), o, error);
  if (status == ParseStatus::kOk) *out = o;
  return status;
}

void printUsage(const char* tool) {
  Options unused;
  std::printf("Usage: %s [options]\nFloat32 sum allreduce sweep with all_reduce_perf's columns.\n%s", tool,
              bench::flagHelp(peerFlags(&unused)).c_str());
}

int runSweep(Backend& backend, const Options& opts, const char* tool) {
  return Sweep(backend, opts, tool).run();
}

}  // namespace braid::peers
