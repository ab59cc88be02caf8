#include "common/option_table.h"

#include <getopt.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace braid::bench {
namespace {

// getopt ids of long-only flags: past every char, so no short flag collides.
constexpr int kLongOnlyId = 1000;

int flagId(const std::vector<Flag>& flags, size_t i) {
  return flags[i].shortName ? flags[i].shortName : kLongOnlyId + static_cast<int>(i);
}

const Flag* findFlag(const std::vector<Flag>& flags, int id) {
  for (size_t i = 0; i < flags.size(); ++i)
    if (flagId(flags, i) == id) return &flags[i];
  return nullptr;
}

std::string helpLine(const std::string& names, const char* help) {
  constexpr size_t kNamesWidth = 26;
  const std::string indent(kNamesWidth + 2, ' ');
  std::string line = "  " + names;
  if (*help) line += names.size() < kNamesWidth ? std::string(kNamesWidth - names.size(), ' ') : " ";
  for (const char* c = help; *c; ++c) line += *c == '\n' ? "\n" + indent : std::string(1, *c);
  return line + "\n";
}

// The table in getopt_long's terms.
struct GetoptSpec {
  std::string shortOpts = ":h";  // leading ':': a missing value comes back as ':'
  std::vector<option> longOpts;

  explicit GetoptSpec(const std::vector<Flag>& flags) {
    for (size_t i = 0; i < flags.size(); ++i) {
      if (flags[i].shortName) shortOpts += std::string(1, flags[i].shortName) + ":";
      longOpts.push_back({flags[i].longName, required_argument, nullptr, flagId(flags, i)});
    }
    longOpts.push_back({"help", no_argument, nullptr, 'h'});
    longOpts.push_back({nullptr, 0, nullptr, 0});
  }
};

ParseStatus parseFlags(int argc, char** argv, const std::vector<Flag>& flags, std::string* error) {
  const GetoptSpec spec(flags);
  optind = 0;  // 0, not 1: glibc then also forgets state left by an earlier parse
  opterr = 0;
  for (int c; (c = getopt_long(argc, argv, spec.shortOpts.c_str(), spec.longOpts.data(), nullptr)) != -1;) {
    if (c == 'h') return ParseStatus::kHelp;
    const Flag* flag = findFlag(flags, c);
    if (c == ':') {
      *error = std::string("option ") + argv[optind - 1] + " needs a value";
    } else if (!flag) {
      *error = std::string("unknown option '") + argv[optind - 1] + "'";
    } else if (flag->apply(optarg, error)) {
      continue;
    }
    return ParseStatus::kError;
  }
  if (optind < argc) {
    *error = std::string("unexpected argument '") + argv[optind] + "'";
    return ParseStatus::kError;
  }
  return ParseStatus::kOk;
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

bool parseInt(const std::string& flag, const char* text, long lo, long hi, long* out, std::string* error) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text, &end, 0);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
    *error = "invalid value '" + std::string(text) + "' for " + flag + " (expected an integer in [" +
             std::to_string(lo) + ", " + std::to_string(hi) + "])";
    return false;
  }
  *out = v;
  return true;
}

Flag sizeFlag(char shortName, const char* longName, size_t* out, const char* help) {
  return {shortName, longName, "<size>", help, [=](const char* text, std::string* error) {
            if (parseSize(text, out)) return true;
            *error = "invalid size '" + std::string(text) + "' for -" + shortName + " (e.g. 8, 64K, 1M, 0.5G)";
            return false;
          }};
}

std::string flagHelp(const std::vector<Flag>& flags) {
  std::string out;
  for (const Flag& f : flags) {
    const std::string shortForm = f.shortName ? std::string("-") + f.shortName + "," : std::string();
    out += helpLine(shortForm + "--" + f.longName + " " + f.valueName, f.help);
  }
  return out + helpLine("-h,--help", "");
}

std::vector<Flag> sweepFlags(SweepOptions* o) {
  return {
      sizeFlag('b', "minbytes", &o->minBytes, "smallest size (default 32M; K/M/G suffixes)"),
      sizeFlag('e', "maxbytes", &o->maxBytes, "largest size (default 32M)"),
      sizeFlag('i', "stepbytes", &o->stepBytes, "add this between sizes (default 1M)"),
      intFlag('f', "stepfactor", 0, 1 << 20, &o->stepFactor, "multiply by this between sizes (overrides -i when > 1)"),
      intFlag('n', "iters", 0, 1 << 30, &o->iters, "timed iterations per size (default 20)"),
      intFlag('w', "warmup_iters", 0, 1 << 30, &o->warmupIters, "untimed iterations before the sweep (default 5)"),
      intFlag('c', "check", 0, 1 << 20, &o->check, "check the results n times per size (default 1; 0 = off)"),
  };
}

ParseStatus parseCommandLine(int argc, char** argv, const std::vector<Flag>& flags, const SweepOptions& sweep,
                             std::string* error) {
  const ParseStatus status = parseFlags(argc, argv, flags, error);
  if (status != ParseStatus::kOk) return status;
  if (sweep.minBytes > sweep.maxBytes) {
    *error = "minbytes (-b " + std::to_string(sweep.minBytes) + ") is larger than maxbytes (-e " +
             std::to_string(sweep.maxBytes) + ")";
    return ParseStatus::kError;
  }
  if (sweep.stepFactor <= 1 && sweep.stepBytes == 0 && sweep.minBytes != sweep.maxBytes) {
    *error = "the size sweep never advances: give -f > 1 or -i > 0";
    return ParseStatus::kError;
  }
  return ParseStatus::kOk;
}

}  // namespace braid::bench
