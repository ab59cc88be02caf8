// Calibration policy: defaults, the per-host cache file, environment overrides,
// and the once-per-process resolution. The measurements are in
// calibration_measure.cc.
#include "tuning/calibration.h"

#include <fcntl.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/env.h"
#include "base/log.h"
#include "base/unique_fd.h"

namespace braid::tuning {

namespace {

constexpr int kInproc = static_cast<int>(TransportClass::InProcess);
constexpr int kShm = static_cast<int>(TransportClass::SharedMemory);
constexpr int kTcp = static_cast<int>(TransportClass::Tcp);

// The cache file's keys, in order: fieldOf(p, i) is the value of kKeys[i].
double* fieldOf(CalibrationParams* p, int i) {
  switch (i) {
    case 0: return &p->alpha[kInproc];
    case 1: return &p->alpha[kShm];
    case 2: return &p->alpha[kTcp];
    case 3: return &p->beta[kInproc];
    case 4: return &p->beta[kShm];
    case 5: return &p->beta[kTcp];
    case 6: return &p->gamma[static_cast<int>(ReduceClass::Wide)];
    case 7: return &p->gamma[static_cast<int>(ReduceClass::Half)];
    case 8: return &p->gamma[static_cast<int>(ReduceClass::BFloat16)];
    case 9: return &p->gamma[static_cast<int>(ReduceClass::Fp8)];
    case 10: return &p->copyBeta;
  }
  return nullptr;
}
constexpr const char* kKeys[] = {"alpha_inproc", "alpha_shm",  "alpha_tcp",  "beta_inproc",
                                 "beta_shm",     "beta_tcp",   "gamma_wide", "gamma_half",
                                 "gamma_bf16",   "gamma_fp8",  "copy_beta"};
constexpr int kNumFields = sizeof(kKeys) / sizeof(kKeys[0]);

// Anything outside these bounds is a corrupt file or a broken measurement.
bool plausibleField(int i, double v) {
  if (!std::isfinite(v) || v <= 0) return false;
  if (i <= 2) return v >= 1e-8 && v <= 1e-2;  // latencies: 10 ns .. 10 ms
  return v >= 1e-12 && v <= 1e-7;             // per byte: 1 TB/s .. 10 MB/s
}

std::string hostnameForFile() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0 || !host[0]) return "localhost";
  std::string s;
  for (const char* c = host; *c; ++c)
    s += (isalnum(static_cast<unsigned char>(*c)) || *c == '-' || *c == '.' || *c == '_') ? *c : '_';
  return s;
}

// mkdir -p for the cache directory (0700: it is the user's own cache).
bool makeDirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string part = dir.substr(0, pos);
    if (mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  return true;
}

std::string dirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Another process of this job may be measuring right now: wait for it (a
// little longer than a calibration takes) rather than measure alongside it,
// which would spoil both measurements. An invalid fd: no lock, go ahead.
UniqueFd lockCalibration(const std::string& cachePath) {
  if (cachePath.empty() || !makeDirs(dirOf(cachePath))) return UniqueFd();
  UniqueFd fd(open((cachePath + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
  if (!fd.valid()) return fd;
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() > give_up) return UniqueFd();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return fd;
}

enum class Mode { Off, Auto, Force };

Mode calibrationMode() {
  std::string v = envString("BRAID_CALIBRATE", "auto");
  const char* s = v.c_str();
  if (!strcasecmp(s, "0") || !strcasecmp(s, "off") || !strcasecmp(s, "no") || !strcasecmp(s, "false"))
    return Mode::Off;
  if (!strcasecmp(s, "force")) return Mode::Force;
  if (strcasecmp(s, "1") && strcasecmp(s, "auto") && strcasecmp(s, "on") && strcasecmp(s, "yes") &&
      strcasecmp(s, "true"))
    BRAID_WARN("BRAID_CALIBRATE=%s is not 0, 1 or force; calibrating as usual", s);
  return Mode::Auto;
}

// A positive number from the environment, or 0 when unset or invalid.
double positiveEnv(const char* name) {
  std::string v = envString(name);
  if (v.empty()) return 0;
  char* end = nullptr;
  double d = strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !std::isfinite(d) || d <= 0) {
    BRAID_WARN("%s=%s is not a positive number; ignored", name, v.c_str());
    return 0;
  }
  return d;
}

}  // namespace

ReduceClass reduceClassOf(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16: return ReduceClass::Half;
    case ncclBfloat16: return ReduceClass::BFloat16;
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return ReduceClass::Fp8;
    default: return ReduceClass::Wide;
  }
}

const char* reduceClassName(ReduceClass c) {
  switch (c) {
    case ReduceClass::Wide: return "wide";
    case ReduceClass::Half: return "half";
    case ReduceClass::BFloat16: return "bfloat16";
    case ReduceClass::Fp8: return "fp8";
  }
  return "?";
}

const char* calibrationSourceName(CalibrationSource s) {
  switch (s) {
    case CalibrationSource::Defaults: return "defaults";
    case CalibrationSource::Measured: return "measured";
    case CalibrationSource::Cache: return "cache";
  }
  return "?";
}

CostParams costParams(const CalibrationParams& c, TransportClass transport, ncclDataType_t type) {
  CostParams p;
  p.alpha = c.alpha[static_cast<int>(transport)];
  p.beta = c.beta[static_cast<int>(transport)];
  p.gamma = c.gamma[static_cast<int>(reduceClassOf(type))];
  p.copyBeta = c.copyBeta;
  return p;
}

CalibrationParams defaultCalibration() {
  CalibrationParams p{};
  p.alpha[kInproc] = 0.5e-6;
  p.alpha[kShm] = 1e-6;
  p.alpha[kTcp] = 30e-6;
  p.beta[kInproc] = 1 / 8e9;
  p.beta[kShm] = 1 / 6e9;
  p.beta[kTcp] = 1 / 1.2e9;  // 10 GbE
  p.gamma[static_cast<int>(ReduceClass::Wide)] = 1 / 6e9;
  p.gamma[static_cast<int>(ReduceClass::Half)] = 1 / 3e9;
  p.gamma[static_cast<int>(ReduceClass::BFloat16)] = 1 / 3e9;
  p.gamma[static_cast<int>(ReduceClass::Fp8)] = 1 / 1e9;
  p.copyBeta = 1 / 10e9;
  p.source = CalibrationSource::Defaults;
  return p;
}

// The cache's format and measurement method. 2: the ping-pong times at least
// 8 batches; a cache of version 1 may hold one stalled batch (alpha_shm 3.7 us
// where the link's is 0.4 us, found on a guest) and is measured again.
constexpr int kCalibrationVersion = 2;

std::string calibrationCachePath() {
  std::string base = envString("XDG_CACHE_HOME");
  if (base.empty()) {
    std::string home = envString("HOME");
    if (home.empty()) return "";
    base = home + "/.cache";
  }
  return base + "/braid/calibration-v" + std::to_string(kCalibrationVersion) + "-" + hostnameForFile() + ".txt";
}

std::string describeCalibration(const CalibrationParams& params) {
  CalibrationParams p = params;
  std::string s;
  char line[96];
  for (int i = 0; i < kNumFields; ++i) {
    snprintf(line, sizeof(line), "%s %.9g\n", kKeys[i], *fieldOf(&p, i));
    s += line;
  }
  return s;
}

bool readCalibrationCache(const std::string& path, CalibrationParams* out) {
  if (path.empty()) return false;
  FILE* f = fopen(path.c_str(), "r");
  if (!f) return false;
  CalibrationParams p = defaultCalibration();
  bool seen[kNumFields] = {};
  char line[256];
  bool ok = true;
  while (ok && fgets(line, sizeof(line), f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    char key[64];
    double v = 0;
    if (sscanf(line, "%63s %lf", key, &v) != 2) {
      ok = false;
      break;
    }
    for (int i = 0; i < kNumFields; ++i)
      if (!strcmp(key, kKeys[i])) {
        ok = plausibleField(i, v);
        *fieldOf(&p, i) = v;
        seen[i] = true;
      }
  }
  fclose(f);
  for (bool s : seen) ok = ok && s;
  if (!ok) {
    BRAID_INFO(kLogTuning, "calibration cache %s is invalid; ignoring it", path.c_str());
    return false;
  }
  p.source = CalibrationSource::Cache;
  *out = p;
  return true;
}

Result writeCalibrationCache(const std::string& path, const CalibrationParams& params) {
  if (path.empty()) return fail(ncclInvalidArgument, "no calibration cache path (HOME unset)");
  if (!makeDirs(dirOf(path))) return systemFail("creating %s", dirOf(path).c_str());
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  FILE* f = fopen(tmp.c_str(), "w");
  if (!f) return systemFail("creating %s", tmp.c_str());
  fprintf(f, "# braid calibration v%d for host %s: seconds per step, seconds per byte\n", kCalibrationVersion,
          hostnameForFile().c_str());
  fputs(describeCalibration(params).c_str(), f);
  bool ok = !ferror(f);
  ok = (fclose(f) == 0) && ok;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    Result r = systemFail("writing %s", path.c_str());
    unlink(tmp.c_str());
    return r;
  }
  return Result::success();
}

void applyCalibrationOverrides(CalibrationParams* p) {
  struct Link {
    const char* alpha;
    const char* bw;
    int index;
  };
  const Link links[] = {{"BRAID_ALPHA_INPROC", "BRAID_BW_INPROC", kInproc},
                        {"BRAID_ALPHA_SHM", "BRAID_BW_SHM", kShm},
                        {"BRAID_ALPHA_TCP", "BRAID_BW_TCP", kTcp}};
  for (const Link& l : links) {
    if (double us = positiveEnv(l.alpha)) p->alpha[l.index] = us * 1e-6;
    if (double gbs = positiveEnv(l.bw)) p->beta[l.index] = 1 / (gbs * 1e9);
  }
  if (double gbs = positiveEnv("BRAID_REDUCE_BW")) {
    const double scale = (1 / (gbs * 1e9)) / p->gamma[static_cast<int>(ReduceClass::Wide)];
    for (double& g : p->gamma) g *= scale;
  }
  if (double gbs = positiveEnv("BRAID_COPY_BW")) p->copyBeta = 1 / (gbs * 1e9);
}

CalibrationParams resolveCalibration(CalibrationMeasure measure) {
  CalibrationParams p = defaultCalibration();
  const Mode mode = calibrationMode();
  const std::string path = calibrationCachePath();
  if (mode == Mode::Off || (mode == Mode::Auto && readCalibrationCache(path, &p))) {
    applyCalibrationOverrides(&p);
    return p;
  }
  UniqueFd lock = lockCalibration(path);
  // Whoever held the lock may just have written the file.
  if (mode == Mode::Auto && readCalibrationCache(path, &p)) {
    applyCalibrationOverrides(&p);
    return p;
  }
  Result r = measure(&p);
  if (!r.ok()) {
    BRAID_INFO(kLogTuning, "calibration incomplete (%s); not caching it", r.message().c_str());
  } else if (!path.empty()) {
    Result w = writeCalibrationCache(path, p);
    if (!w.ok()) BRAID_INFO(kLogTuning, "calibration kept in memory only: %s", w.message().c_str());
  }
  applyCalibrationOverrides(&p);
  return p;
}

}  // namespace braid::tuning
