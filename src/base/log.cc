#include "base/log.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

namespace braid {

namespace {

struct LogConfig {
  LogLevel level = LogLevel::None;
  uint32_t subsys = kLogInit | kLogEnv;  // NCCL's default subsystem set for INFO
  FILE* out = stderr;
  char host[64] = {};
};

struct SubsysName {
  const char* name;
  uint32_t bit;
};
constexpr SubsysName kSubsysNames[] = {
    {"INIT", kLogInit},   {"COLL", kLogColl},       {"P2P", kLogP2P},   {"SHM", kLogShm},
    {"NET", kLogNet},     {"GRAPH", kLogGraph},     {"TUNING", kLogTuning}, {"ENV", kLogEnv},
    {"ALLOC", kLogAlloc}, {"BOOTSTRAP", kLogBootstrap}, {"ALL", kLogAll},
};

uint32_t parseSubsys(const char* spec) {
  bool invert = spec[0] == '^';
  if (invert) ++spec;
  uint32_t mask = 0;
  std::string s(spec);
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (const auto& n : kSubsysNames)
      if (strcasecmp(tok.c_str(), n.name) == 0) mask |= n.bit;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

FILE* openLogFile(const char* pattern) {
  std::string path;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '%' && p[1] == 'h') {
      char host[64] = {};
      gethostname(host, sizeof(host) - 1);
      path += host;
      ++p;
    } else if (p[0] == '%' && p[1] == 'p') {
      path += std::to_string(getpid());
      ++p;
    } else {
      path += *p;
    }
  }
  FILE* f = fopen(path.c_str(), "w");
  return f ? f : stderr;
}

const LogConfig& config() {
  static const LogConfig cfg = [] {
    LogConfig c;
    const char* level = getenv("NCCL_DEBUG");
    if (level) {
      if (!strcasecmp(level, "VERSION")) c.level = LogLevel::Version;
      else if (!strcasecmp(level, "WARN")) c.level = LogLevel::Warn;
      else if (!strcasecmp(level, "INFO")) c.level = LogLevel::Info;
      else if (!strcasecmp(level, "TRACE")) c.level = LogLevel::Trace;
    }
    const char* subsys = getenv("NCCL_DEBUG_SUBSYS");
    if (subsys && *subsys) c.subsys = parseSubsys(subsys);
    const char* file = getenv("NCCL_DEBUG_FILE");
    if (file && *file && c.level != LogLevel::None) c.out = openLogFile(file);
    gethostname(c.host, sizeof(c.host) - 1);
    return c;
  }();
  return cfg;
}

thread_local int tlsRank = -1;

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::Warn: return "WARN";
    case LogLevel::Info: return "INFO";
    case LogLevel::Trace: return "TRACE";
    default: return "";
  }
}

}  // namespace

void setLogRank(int rank) { tlsRank = rank; }

bool logEnabled(LogLevel level, uint32_t subsys) {
  const LogConfig& c = config();
  if (static_cast<int>(level) > static_cast<int>(c.level)) return false;
  // Warnings always pass the subsystem filter, as in NCCL.
  return level <= LogLevel::Warn || (c.subsys & subsys) != 0;
}

void logMessage(LogLevel level, uint32_t, const char* file, int line, const char* fmt, ...) {
  const LogConfig& c = config();
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  char rank[16] = "";
  if (tlsRank >= 0) snprintf(rank, sizeof(rank), " [%d]", tlsRank);
  long tid = syscall(SYS_gettid);
  if (level == LogLevel::Trace) {
    const char* base = strrchr(file, '/');
    fprintf(c.out, "%s:%d:%ld%s BRAID %s %s:%d %s\n", c.host, getpid(), tid, rank, levelName(level),
            base ? base + 1 : file, line, msg);
  } else {
    fprintf(c.out, "%s:%d:%ld%s BRAID %s %s\n", c.host, getpid(), tid, rank, levelName(level), msg);
  }
  fflush(c.out);
}

}  // namespace braid
