// The one command-line parser of the perf programs: a program lists its
// flags in a table and both the getopt loop and the help text are made from
// it, so they cannot disagree. braid's perf tools (options.cc) and the MPI /
// Gloo peers (peers/peer_driver.cc) share it, and with it the sweep flags, so
// race.sh can hand all of them the same command line.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace braid::bench {

// Takes a flag's value; false with *error saying why the value is refused.
using ApplyFlag = std::function<bool(const char* value, std::string* error)>;

struct Flag {
  char shortName;         // '\0': long form only
  const char* longName;
  const char* valueName;  // how the help shows the value: "<size>", "host|device|auto"
  const char* help;       // '\n' starts a continuation line
  ApplyFlag apply;
};

enum class ParseStatus { kOk, kHelp, kError };

// One line per flag, in table order, then -h,--help.
std::string flagHelp(const std::vector<Flag>& flags);

// "32M"-style sizes: K/M/G (binary), fractions allowed. False if malformed.
bool parseSize(const std::string& text, size_t* out);
// An integer in [lo, hi]; otherwise false, with *error naming `flag`.
bool parseInt(const std::string& flag, const char* text, long lo, long hi, long* out, std::string* error);

// Flags that store one number. Errors name the short form, as nccl-tests
// users type it, so these need a shortName.
Flag sizeFlag(char shortName, const char* longName, size_t* out, const char* help);

template <typename T>
Flag intFlag(char shortName, const char* longName, long lo, long hi, T* out, const char* help,
             const char* valueName = "<n>") {
  return {shortName, longName, valueName, help, [=](const char* text, std::string* error) {
            long v = 0;
            if (!parseInt(std::string("-") + shortName, text, lo, hi, &v, error)) return false;
            *out = static_cast<T>(v);
            return true;
          }};
}

// The size sweep and its iterations: all a peer program takes, and the
// start of braid's tools' options.
struct SweepOptions {
  size_t minBytes = 32u << 20;  // nccl-tests' defaults
  size_t maxBytes = 32u << 20;
  size_t stepBytes = 1u << 20;
  size_t stepFactor = 1;  // > 1: multiply, else add stepBytes
  int iters = 20;
  int warmupIters = 5;
  int check = 1;  // check iterations per size (0: no check)
};

// -b -e -i -f -n -w -c, writing into *o.
std::vector<Flag> sweepFlags(SweepOptions* o);
// Parses argv with `flags`, then refuses the sweep they wrote into `sweep`
// when it runs backwards or never advances. Every flag takes a value;
// -h/--help is implied. kHelp: usage was requested; kError: *error says why.
ParseStatus parseCommandLine(int argc, char** argv, const std::vector<Flag>& flags, const SweepOptions& sweep,
                             std::string* error);

}  // namespace braid::bench
