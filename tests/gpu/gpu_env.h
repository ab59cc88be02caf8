// Whether this machine has a usable CUDA GPU, for the tests of tests/gpu:
// without one they skip and say why, unless BRAID_REQUIRE_GPU is set (run.sh
// sets it on the GPU machine, where a skip would hide a broken setup).
#ifndef BRAID_TESTS_GPU_GPU_ENV_H_
#define BRAID_TESTS_GPU_GPU_ENV_H_

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace gputest {

// Asks CUDA in this process (which initialises it here: not for a process
// that forks ranks afterwards).
inline std::string noGpuReasonHere() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess)
    return std::string("no CUDA GPU: cudaGetDeviceCount failed with ") + cudaGetErrorName(err) + " (" +
           cudaGetErrorString(err) + ")";
  if (n == 0) return "no CUDA GPU: cudaGetDeviceCount found 0 devices";
  return "";
}

// Asks CUDA in a forked child, so that this process stays free of CUDA and
// may fork ranks that initialise it themselves.
inline std::string noGpuReasonForked() {
  int fds[2];
  if (pipe(fds) != 0) return "no CUDA GPU: pipe() failed";
  const pid_t pid = fork();
  if (pid < 0) return "no CUDA GPU: fork() failed";
  if (pid == 0) {
    close(fds[0]);
    const std::string reason = noGpuReasonHere();
    if (!reason.empty() && write(fds[1], reason.data(), reason.size()) < 0) _exit(2);
    _exit(reason.empty() ? 0 : 1);
  }
  close(fds[1]);
  std::string reason;
  char buf[256];
  ssize_t got;
  while ((got = read(fds[0], buf, sizeof buf)) > 0) reason.append(buf, static_cast<size_t>(got));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  return reason.empty() ? "no CUDA GPU: the probe process failed" : reason;
}

inline bool gpuRequired() {
  const char* require = std::getenv("BRAID_REQUIRE_GPU");
  return require != nullptr && *require != '\0' && std::string(require) != "0";
}

}  // namespace gputest

// In a test body or SetUp: skips (or fails under BRAID_REQUIRE_GPU) without a GPU.
#define GPU_REQUIRE_OR_SKIP(reasonExpr)                                          \
  do {                                                                           \
    const std::string gpu_reason_ = (reasonExpr);                                \
    if (!gpu_reason_.empty()) {                                                  \
      if (::gputest::gpuRequired()) FAIL() << gpu_reason_ << " (BRAID_REQUIRE_GPU is set)"; \
      GTEST_SKIP() << gpu_reason_;                                               \
    }                                                                            \
  } while (0)

#endif  // BRAID_TESTS_GPU_GPU_ENV_H_
