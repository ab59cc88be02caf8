// Logging that honours NCCL_DEBUG (VERSION, WARN, INFO, TRACE), NCCL_DEBUG_SUBSYS
// (comma list, ^ to exclude, ALL) and NCCL_DEBUG_FILE (%h host, %p pid).
#pragma once

#include <cstdint>

namespace braid {

enum class LogLevel : int { None = 0, Version = 1, Warn = 2, Info = 3, Trace = 4 };

// Subsystems, named as NCCL names them where they mean the same thing.
enum LogSubsys : uint32_t {
  kLogInit = 1u << 0,
  kLogColl = 1u << 1,
  kLogP2P = 1u << 2,
  kLogShm = 1u << 3,
  kLogNet = 1u << 4,
  kLogGraph = 1u << 5,
  kLogTuning = 1u << 6,
  kLogEnv = 1u << 7,
  kLogAlloc = 1u << 8,
  kLogBootstrap = 1u << 9,
  kLogAll = ~0u,
};

bool logEnabled(LogLevel level, uint32_t subsys);
void logMessage(LogLevel level, uint32_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

// Rank shown in log lines of the calling thread ("[rank]"); -1 hides it.
void setLogRank(int rank);

}  // namespace braid

#define BRAID_LOG(level, subsys, ...)                                              \
  do {                                                                             \
    if (::braid::logEnabled(level, subsys))                                        \
      ::braid::logMessage(level, subsys, __FILE__, __LINE__, __VA_ARGS__);         \
  } while (0)
#define BRAID_WARN(...) BRAID_LOG(::braid::LogLevel::Warn, ::braid::kLogAll, __VA_ARGS__)
#define BRAID_INFO(subsys, ...) BRAID_LOG(::braid::LogLevel::Info, subsys, __VA_ARGS__)
#define BRAID_TRACE(subsys, ...) BRAID_LOG(::braid::LogLevel::Trace, subsys, __VA_ARGS__)
