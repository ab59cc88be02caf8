// SIGUSR1 asks every waiting braid call to say what it waits for. The handler
// only counts requests; whoever waits (the executor, the bootstrap, connection
// set-up) notices the count change and prints one line of its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace braid {

// Installs the SIGUSR1 handler once per process, unless BRAID_SIGUSR1=0 or the
// program already handles SIGUSR1 (braid never takes a signal from its user).
// Called as creation starts, so a rank stuck in init is not killed by it.
void installDiagnosisSignal();

// How many SIGUSR1 have arrived.
uint64_t diagnosisRequests();

// For a wait outside the executor: prints "braid diagnosis: <what> (for N s)"
// once per request that arrives while it waits.
class WaitDiagnosis {
 public:
  WaitDiagnosis() : seen_(diagnosisRequests()), since_(std::chrono::steady_clock::now()) {}
  // `describe` is only called when a request is pending.
  template <typename Describe>
  void poll(Describe describe) {
    const uint64_t now = diagnosisRequests();
    if (now == seen_) return;
    seen_ = now;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count();
    fprintf(stderr, "braid diagnosis: %s (for %.1f s)\n", std::string(describe()).c_str(), waited);
  }

 private:
  uint64_t seen_;
  std::chrono::steady_clock::time_point since_;
};

}  // namespace braid
