// The sweep shared by the peer programs (Open MPI, Gloo): the same sizes,
// iteration logic, time combination and output columns as braid's
// all_reduce_perf, so race.sh parses all three tables alike. Float32 sum only.
// The peers never link braid: each one talks to its own library through a
// Backend and this driver knows nothing of MPI or Gloo.
#pragma once

#include <cstddef>
#include <string>

#include "common/option_table.h"

namespace braid::peers {

using Options = bench::SweepOptions;  // all_reduce_perf's defaults
using bench::ParseStatus;

// all_reduce_perf's flags that mean something for a float32 sum, through
// its parser: the sweep flags, and -d float and -o sum (other values are
// refused). *error says what is wrong on kError.
ParseStatus parseOptions(int argc, char** argv, Options* out, std::string* error);
void printUsage(const char* tool);

// What a peer library provides. Every call is collective over all ranks.
// Failures do not come back: a backend reports them and ends the process.
class Backend {
 public:
  virtual ~Backend() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // One line for the header: the library, its version and transport.
  virtual std::string describe() const = 0;
  // send == recv asks for the library's in-place form.
  virtual void allreduceFloatSum(const float* send, float* recv, size_t count) = 0;
  virtual void barrier() = 0;
  virtual double sumAcrossRanks(double v) = 0;
};

// Runs the sweep; rank 0 prints the table. Returns the exit status
// (1 when any checked element was wrong).
int runSweep(Backend& backend, const Options& opts, const char* tool);

}  // namespace braid::peers
