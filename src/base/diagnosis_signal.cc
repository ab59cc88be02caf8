#include "base/diagnosis_signal.h"

#include <signal.h>

#include <atomic>
#include <mutex>

#include "base/env.h"

namespace braid {

namespace {

// A signal handler can only leave a mark; this counter is that mark.
std::atomic<uint64_t> gDiagnosisRequests{0};

void onSigusr1(int) { gDiagnosisRequests.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

void installDiagnosisSignal() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!envBool("BRAID_SIGUSR1", true)) return;
    struct sigaction current {};
    if (sigaction(SIGUSR1, nullptr, &current) != 0) return;
    if (current.sa_handler != SIG_DFL || (current.sa_flags & SA_SIGINFO)) return;  // the program's own
    struct sigaction sa {};
    sa.sa_handler = onSigusr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, nullptr);
  });
}

uint64_t diagnosisRequests() { return gDiagnosisRequests.load(std::memory_order_relaxed); }

}  // namespace braid
