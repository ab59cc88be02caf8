// Starts the ranks of a job as child processes and watches them: forwards
// SIGINT/SIGTERM/SIGHUP, stops everyone when one rank fails, optionally tags
// each output line with its rank.
#pragma once

#include <string>
#include <vector>

namespace braid::run {

struct JobSpec {
  std::vector<std::string> argv;  // program and its arguments
  // Environment of each rank, "NAME=value" strings (one vector per rank).
  std::vector<std::vector<std::string>> env;
  bool tagOutput = false;
  double graceSeconds = 2.0;  // SIGTERM to SIGKILL, after a failure or a signal
};

// Runs the job to its end. Returns the exit status for braidrun: 0 when every
// rank exited 0; else the first failing rank's exit code (128+signal when a
// signal killed it), or 128+signal when braidrun itself was interrupted.
int runJob(const JobSpec& job);

}  // namespace braid::run
