// tests/gpu/test_kernels.h for the fake CUDA runtime: the gate kernel as a
// task on the stream. The recorder tracks it like braid's kernels: it spins
// until the application sets the gate after its calls into braid returned,
// so a synchronising call inside braid would wait for it for ever (as one
// did on an H200 before this was tracked).
#include <chrono>
#include <thread>

#include "fakecuda.h"
#include "test_kernels.h"

namespace gputest {

cudaError_t launchGateThenFill(const volatile int* gate, int32_t* out, size_t n, int32_t value,
                               volatile int* timedOut, uint64_t limitNs, cudaStream_t stream) {
  const uint64_t id = fakecuda::trackLaunch("the application's gate kernel", stream);
  const cudaError_t err = fakecuda::enqueue(stream, [=] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(limitNs);
    while (__atomic_load_n(gate, __ATOMIC_ACQUIRE) == 0) {
      if (std::chrono::steady_clock::now() > until) {
        *timedOut = 1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    for (size_t i = 0; i < n; ++i) out[i] = value;
    fakecuda::finishLaunch(id);
  });
  if (err != cudaSuccess) fakecuda::finishLaunch(id);
  return err == cudaSuccess ? cudaSuccess : cudaGetLastError();
}

}  // namespace gputest
