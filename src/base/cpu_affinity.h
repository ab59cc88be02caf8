// The CPUs a thread may run on, and pinning a thread to one of them: the one
// place the engine, its tests and benchmarks read and set affinity.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <vector>

namespace braid {

// The calling thread's CPUs in ascending order (empty if they cannot be read).
inline std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (pthread_getaffinity_np(pthread_self(), sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

// Pins the calling thread to `cpu`; false where the cpuset does not allow it.
[[nodiscard]] inline bool pinThisThread(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
}

}  // namespace braid
